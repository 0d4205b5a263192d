#include "schedule_helpers.h"

namespace gka {

using namespace Halide;

void transpose_tokens(Func f, const std::vector<Func> &consumers, int vec) {
    Func copy = f.in(consumers);
    std::vector<Var> a = copy.args();  // (d, h, t, b)
    Var ti("ti"), di("di");
    // Square tiles, vectorized over tokens and unrolled over d, become dense
    // loads and in-register transposes instead of gathers.
    copy.compute_root()
        .reorder_storage(a[2], a[0], a[1], a[3])
        .split(a[2], a[2], ti, vec, TailStrategy::RoundUp)
        .split(a[0], a[0], di, vec, TailStrategy::GuardWithIf)  // any head dim: guard, never read past D
        .reorder(ti, di, a[2], a[0], a[1], a[3])
        .vectorize(ti)
        .unroll(di)
        .parallel(a[3]);
}

void head_major_copy(Func f, const std::vector<Func> &consumers, int vec) {
    Func copy = f.in(consumers);
    std::vector<Var> a = copy.args();  // (d, h, t, b)
    copy.compute_root()
        .reorder_storage(a[0], a[2], a[1], a[3])
        .reorder(a[0], a[2], a[1], a[3])
        .vectorize(a[0], vec, TailStrategy::GuardWithIf)
        .parallel(a[3]);
}

void schedule_sqnorm(Scores &s, const Vars &v, int vec) {
    s.sqnorm.compute_root().vectorize(v.t, vec, TailStrategy::RoundUp).parallel(v.b);
    s.sqnorm.update().reorder(v.t, s.rd.x).vectorize(v.t, vec, TailStrategy::RoundUp).parallel(v.b);
}

void schedule_band_sum(BandSum &s, const Vars &v, const Expr &head_dim, int vec, int tile, int block, int d_block) {
    Var oo = s.micro_block, oi("oi"), dd("dd");
    s.sum.compute_root().vectorize(v.d, vec).parallel(v.band);
    s.stats.compute_root().vectorize(v.offset, vec).parallel(v.band);

    Stage sum = s.sum.update(), stats = s.stats.update();
    for (Stage st : {sum, stats}) {
        st.split(v.offset, oo, oi, tile)
            .split(s.window, s.block, s.in_block, block, TailStrategy::GuardWithIf)
            .unroll(oi)
            .parallel(v.band);
    }
    stats.reorder(oi, s.in_block, oo, s.block, v.band, v.h, v.b);
    // Common head dims get constant, fully unrolled d loops; others guard the edge.
    for (int D : {32, 64, 128}) {
        const int db = std::min(D, d_block);
        sum.specialize(head_dim == D)
            .split(v.d, dd, v.d, db)
            .reorder(v.d, oi, s.in_block, dd, oo, s.block, v.band, v.h, v.b)
            .vectorize(v.d, vec)
            .unroll(v.d);
    }
    sum.split(v.d, dd, v.d, d_block, TailStrategy::GuardWithIf)
        .reorder(v.d, oi, s.in_block, dd, oo, s.block, v.band, v.h, v.b)
        .vectorize(v.d, vec, TailStrategy::GuardWithIf);
    stats.compute_with(sum, oo);
}

void schedule_score_tile(Func f, const RDom &rd, const Var &lanes, const Var &across, const LoopLevel &at,
                         int lane_extent, int across_extent, int vec) {
    f.compute_at(at)
        .bound_extent(lanes, lane_extent)
        .bound_extent(across, across_extent)
        .reorder_storage(lanes, across)
        .vectorize(lanes, vec);
    f.update().reorder(lanes, across, rd.x).vectorize(lanes, vec).unroll(lanes).unroll(across);
}

void schedule_token_output(Func out, const Vars &v, int vec) {
    Var to("to"), ti("ti");
    out.split(v.t, to, ti, 16, TailStrategy::GuardWithIf)
        .reorder(v.d, ti, v.h, to, v.b)
        .vectorize(v.d, vec, TailStrategy::GuardWithIf)
        .parallel(to);
}

}  // namespace gka
