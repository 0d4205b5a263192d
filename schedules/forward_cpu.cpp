// CPU schedule of the GKA forward (generators/gka_forward.h).
//
// One task per (band of queries, head, batch). In a band, each micro-block of
// query_tile queries walks the band's key window by blocks of key_tile keys:
// the score tile (key_tile x query_tile) is a small GEMM vectorized over keys
// that reads keys from a transposed copy of x, is exponentiated in place, then
// folded into the micro-block's accumulators (head_dim x query_tile, vectorized
// over d), which stay in registers across the key block. Row sums ride along in
// the same loop (compute_with). Key blocks that a micro-block's mask excludes
// allocate and compute nothing.
#include "schedules.h"

namespace gka {

using namespace Halide;

Knobs forward_knobs(const Target &target, const std::string &overrides) {
    Knobs k = [&] {
        switch (family_of(target)) {
        case Family::Avx512: return Knobs({{"vector", 16}, {"band", 48}, {"query_tile", 6}, {"key_tile", 64}});
        case Family::Avx2: return Knobs({{"vector", 8}, {"band", 48}, {"query_tile", 4}, {"key_tile", 32}});
        default: return Knobs({{"vector", 4}, {"band", 48}, {"query_tile", 4}, {"key_tile", 16}});
        }
    }();
    k.override_with(overrides);
    if (k["band"] % k["query_tile"] != 0) throw std::invalid_argument("gka schedule: band must be a multiple of query_tile");
    return k;
}

void schedule_forward(ForwardPipeline &p, const Knobs &k, const Target &target) {
    const int vec = k["vector"], qt = k["query_tile"], kt = k["key_tile"];
    const Vars &v = p.v;
    Var oo("oo"), oi("oi"), io("io"), ii("ii"), to("to"), ti("ti");
    RVar ko("ko"), ki("ki");

    // Keys contiguous per head, for the score GEMM's vector loads.
    Func xt = p.x.in({p.scores.dot, p.scores.sqnorm});
    {
        std::vector<Var> a = xt.args();  // (d, h, t, b)
        xt.compute_root().reorder_storage(a[2], a[0], a[1], a[3]).reorder(a[2], a[0], a[1], a[3])
            .vectorize(a[2], vec, TailStrategy::RoundUp).parallel(a[3]);
    }
    p.scores.sqnorm.compute_root().vectorize(v.t, vec, TailStrategy::RoundUp).parallel(v.b);
    p.scores.sqnorm.update().reorder(v.t, p.scores.rd.x).vectorize(v.t, vec, TailStrategy::RoundUp).parallel(v.b);

    Func ws = p.weighted_sum, rs = p.row_sum;
    ws.compute_root().vectorize(v.d, vec).parallel(v.band);
    rs.compute_root().vectorize(v.offset, vec).parallel(v.band);
    for (Stage s : {ws.update(), rs.update()}) {
        s.split(v.offset, oo, oi, qt)
            .split(p.keys.x, ko, ki, kt, TailStrategy::GuardWithIf)
            .unroll(oi)
            .parallel(v.band);
    }
    ws.update().reorder(v.d, oi, ki, ko, oo, v.band, v.h, v.b).vectorize(v.d, vec, TailStrategy::GuardWithIf);
    rs.update().reorder(oi, ki, ko, oo, v.band, v.h, v.b).compute_with(ws.update(), ko);

    p.weight.compute_at(ws, ko).vectorize(v.j, vec, TailStrategy::RoundUp);
    p.scores.dot.compute_at(ws, ko).vectorize(v.j, vec, TailStrategy::RoundUp);
    p.scores.dot.update()
        .split(v.i, io, ii, qt, TailStrategy::RoundUp)
        .reorder(v.j, ii, p.scores.rd.x, io)
        .vectorize(v.j, vec, TailStrategy::RoundUp)
        .unroll(ii);

    // Outputs: T and D are arbitrary, so their edges are guarded.
    p.y.split(v.t, to, ti, 16, TailStrategy::GuardWithIf)
        .reorder(v.d, ti, v.h, to, v.b)
        .vectorize(v.d, vec, TailStrategy::GuardWithIf)
        .parallel(to);
    p.lse.vectorize(v.t, vec, TailStrategy::GuardWithIf).parallel(v.h);
}

}  // namespace gka
