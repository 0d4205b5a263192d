// CPU schedule of the GKA backward (generators/gka_backward.h).
//
// Two passes over the pairs, each shaped like the forward (schedules/forward_cpu.cpp):
// - by query: one task per (query band, head, batch); micro-blocks of query_tile
//   queries walk their key window by blocks of key_block keys. The score and dP
//   tiles are GEMMs vectorized over keys; dS folds into the micro-block's
//   accumulators of sum_j dS_ij x_j (registers, vectorized over d), and the
//   scalar sums of dS and dS*s ride along (compute_with).
// - by key: one task per (key band, head, batch); micro-blocks of key_tile keys
//   walk their query window by blocks of query_block queries. The tiles are
//   vectorized over queries, read from transposed copies of x and dy.
// Each output element is written by one task in a fixed order: deterministic.
#include "schedules.h"

namespace gka {

using namespace Halide;

Knobs backward_knobs(const Target &target, const std::string &overrides) {
    Knobs k = [&] {
        switch (family_of(target)) {
        case Family::Avx512:
            return Knobs({{"vector", 16}, {"band", 48}, {"query_tile", 6}, {"key_block", 64}, {"key_tile", 6},
                          {"query_block", 64}});
        case Family::Avx2:
            return Knobs({{"vector", 8}, {"band", 48}, {"query_tile", 4}, {"key_block", 32}, {"key_tile", 4},
                          {"query_block", 32}});
        default:
            return Knobs({{"vector", 4}, {"band", 48}, {"query_tile", 4}, {"key_block", 16}, {"key_tile", 4},
                          {"query_block", 16}});
        }
    }();
    k.override_with(overrides);
    if (k["band"] % k["query_tile"] != 0 || k["band"] % k["key_tile"] != 0) {
        throw std::invalid_argument("gka schedule: band must be a multiple of query_tile and key_tile");
    }
    return k;
}

namespace {

// A copy of `f` (d, h, t, b) for `consumers`, stored with tokens innermost.
void transpose_tokens(Func f, const std::vector<Func> &consumers, int vec) {
    Func copy = f.in(consumers);
    std::vector<Var> a = copy.args();  // (d, h, t, b)
    copy.compute_root().reorder_storage(a[2], a[0], a[1], a[3]).reorder(a[2], a[0], a[1], a[3])
        .vectorize(a[2], vec, TailStrategy::RoundUp).parallel(a[3]);
}

// A reduction over a band's window: micro-blocks of `tile` band offsets, the
// window's `rvar` by blocks of `block`, accumulators vectorized over d.
void schedule_band_sum(Func sum, Func stats, RVar rvar, const Vars &v, int vec, int tile, int block) {
    Var oo("oo"), oi("oi");
    RVar ro("ro"), ri("ri");
    sum.compute_root().vectorize(v.d, vec).parallel(v.band);
    stats.compute_root().vectorize(v.offset, vec).parallel(v.band);
    for (Stage s : {sum.update(), stats.update()}) {
        s.split(v.offset, oo, oi, tile).split(rvar, ro, ri, block, TailStrategy::GuardWithIf).unroll(oi).parallel(v.band);
    }
    sum.update().reorder(v.d, oi, ri, ro, oo, v.band, v.h, v.b).vectorize(v.d, vec, TailStrategy::GuardWithIf);
    stats.update().reorder(oi, ri, ro, oo, v.band, v.h, v.b).compute_with(sum.update(), ro);
}

}  // namespace

void schedule_backward(BackwardPipeline &p, const Knobs &k, const Target &target) {
    const int vec = k["vector"];
    const Vars &v = p.v;
    (void)target;

    transpose_tokens(p.x, {p.by_query.scores.dot, p.by_query.scores.sqnorm, p.by_query.dprob, p.by_key.scores.dot,
                           p.by_key.scores.sqnorm, p.by_key.dprob},
                     vec);
    transpose_tokens(p.dy, {p.by_query.dprob, p.by_key.dprob}, vec);
    p.delta.compute_root().vectorize(v.t, vec, TailStrategy::RoundUp).parallel(v.b);
    p.delta.update().vectorize(v.t, vec, TailStrategy::RoundUp).parallel(v.b);
    for (PairTerms *t : {&p.by_query, &p.by_key}) {
        t->scores.sqnorm.compute_root().vectorize(v.t, vec, TailStrategy::RoundUp).parallel(v.b);
        t->scores.sqnorm.update().reorder(v.t, t->scores.rd.x).vectorize(v.t, vec, TailStrategy::RoundUp).parallel(v.b);
    }

    // By query: tiles vectorized over keys j, unrolled over queries i.
    {
        const int qt = k["query_tile"], kb = k["key_block"];
        schedule_band_sum(p.query_sum, p.query_stats, p.keys.x, v, vec, qt, kb);
        PairTerms &t = p.by_query;
        Var io("io"), ii("ii");
        t.dscore.compute_at(p.query_sum, RVar("ro")).vectorize(v.j, vec, TailStrategy::RoundUp);
        for (Func f : {t.scores.dot, t.dprob}) {
            f.compute_at(p.query_sum, RVar("ro")).vectorize(v.j, vec, TailStrategy::RoundUp);
            f.update()
                .split(v.i, io, ii, qt, TailStrategy::RoundUp)
                .reorder(v.j, ii, t.scores.rd.x, io)
                .vectorize(v.j, vec, TailStrategy::RoundUp)
                .unroll(ii);
        }
    }
    // By key: tiles vectorized over queries i, unrolled over keys j.
    {
        const int kt = k["key_tile"], qb = k["query_block"];
        schedule_band_sum(p.key_sum, p.key_stats, p.queries.x, v, vec, kt, qb);
        PairTerms &t = p.by_key;
        Var jo("jo"), ji("ji");
        for (Func f : {t.dscore, t.prob}) {
            f.compute_at(p.key_sum, RVar("ro")).vectorize(v.i, vec, TailStrategy::RoundUp);
        }
        for (Func f : {t.scores.dot, t.dprob}) {
            f.compute_at(p.key_sum, RVar("ro")).vectorize(v.i, vec, TailStrategy::RoundUp);
            f.update()
                .split(v.j, jo, ji, kt, TailStrategy::RoundUp)
                .reorder(v.i, ji, t.scores.rd.x, jo)
                .vectorize(v.i, vec, TailStrategy::RoundUp)
                .unroll(ji);
        }
    }

    p.dsigma_sum.compute_root();
    Var to("to"), ti("ti");
    p.dx.split(v.t, to, ti, 16, TailStrategy::GuardWithIf)
        .reorder(v.d, ti, v.h, to, v.b)
        .vectorize(v.d, vec, TailStrategy::GuardWithIf)
        .parallel(to);
}

}  // namespace gka
