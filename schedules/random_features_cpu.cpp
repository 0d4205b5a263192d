// CPU schedule of random-feature GKA: the states, forward and backward passes
// (generators/gka_random_features.h).
//
// Every stage is computed at root, a chunk of tokens a task and every (head,
// batch) in parallel (the runtime runs a few heads at a time, so that the
// stages' buffers stay bounded: runtime/cpu_random_features.cpp). Every
// GEMM-shaped sum goes by register tiles of vec x 8 (register_tiles: x
// vectorized, the other dimension unrolled, the reductions outside the tile),
// stored with x innermost, and each operand it reads as vectors is stored so
// that they are contiguous:
// - the factors rho and kappa (m, t) m innermost; a transposed copy of kappa
//   (t innermost) for the chunk's C x C products, vectorized over its keys;
// - the states (m, d, c) d innermost, so that a query's numerator (and the
//   value path) adds a row of the state per feature as vectors; transposed
//   copies where a sum runs over d for each feature (the backward's exponent
//   gradients). The states are 1/C the size of the tokens' work, so the copies
//   cost little;
// - the prefix sums over chunks run in order within a (head, batch),
//   vectorized over d.
// (Zen 4, T = 16384, D = 64, M = 128: accumulating in memory instead of
// tiles, the forward took 2.5x the time and the backward 2x; copying the
// transposes an element at a time, the forward 1.3x.)
#include "schedule_helpers.h"
#include "schedules.h"

namespace gka {

using namespace Halide;

// vector: lanes (the family's). chunk: tokens a chunk (the algorithm's: a
// different chunk changes the order of the sums, so results by float
// rounding alone).
const std::vector<Knob<CpuRandomFeatureKnobs>> &CpuRandomFeatureKnobs::fields() {
    using K = CpuRandomFeatureKnobs;
    static const std::vector<Knob<K>> fields = {
        {"vector", &K::vector, {}},
        {"chunk", &K::chunk, {32, 64, 128}},
    };
    return fields;
}

CpuRandomFeatureKnobs cpu_random_feature_knobs(Family family) {
    CpuRandomFeatureKnobs k{};
    k.chunk = 64;
    k.vector = family == Family::Avx512 ? 16 : family == Family::Avx2 ? 8 : 4;
    return k;
}

namespace {

// A Func of (..., t, h, b) computed at root, a chunk of tokens a task.
void by_chunks(Func f, const Var &t, const Var &h, const Var &b, int chunk) {
    Var chunk_of("chunk_of");
    f.compute_root().split(t, chunk_of, t, chunk, TailStrategy::GuardWithIf).parallel(chunk_of).parallel(h).parallel(b);
    for (int k = 0; k < f.num_update_definitions(); k++) {
        Var task("task");
        f.update(k).split(t, task, t, chunk, TailStrategy::GuardWithIf).parallel(task).parallel(h).parallel(b);
    }
}

// A pure Func of (x, ..., t, ...) where it is computed: vectorized over x, a
// chunk of tokens a task (outputs: their storage is the caller's, no rounding up).
void by_tokens(Func f, const Var &x, const Var &t, const Var &h, const Var &b, int chunk, int vec) {
    f.vectorize(x, vec, TailStrategy::GuardWithIf).parallel(t, chunk, TailStrategy::GuardWithIf).parallel(h).parallel(b);
}

// An elementwise Func of (x, t, h, b), vectorized over x, a chunk of tokens a task.
void vectorized_by_chunks(Func f, const Var &x, const Var &t, const Var &h, const Var &b, int chunk, int vec) {
    by_chunks(f, t, h, b, chunk);
    f.vectorize(x, vec, TailStrategy::GuardWithIf);
}

// A GEMM-shaped sum f (x, y, ...): computed a tile of vec x `rows` at a time,
// x vectorized and y unrolled, each update's reductions outside the tile (its
// accumulators in registers), into a copy (f.in(), which f's consumers read)
// rounded up to whole tiles. Returns the copy's loops outside the tile:
// (x tiles, y tiles), for the caller to order and parallelize.
struct Tiled {
    Func out;
    Var x_tiles{"x_tiles"}, y_tiles{"y_tiles"};
};
Tiled register_tiles(Func f, const Var &x, const Var &y, int vec, int rows) {
    Tiled t{f.in()};
    Var xi("xi"), yi("yi");
    f.reorder_storage(x, y);
    t.out.reorder_storage(x, y).compute_root()
        .tile(x, y, t.x_tiles, t.y_tiles, xi, yi, vec, rows, TailStrategy::RoundUp)
        .vectorize(xi)
        .unroll(yi);
    f.compute_at(t.out, t.x_tiles).vectorize(x).unroll(y);
    for (int k = 0; k < f.num_update_definitions(); k++) {
        std::vector<VarOrRVar> order{x, y};
        for (const RVar &r : f.rvars(k)) order.push_back(r);
        f.update(k).reorder(order).vectorize(x).unroll(y);
    }
    return t;
}

// Register tiles of a sum over (x, t, h, b): tiles of `rows` tokens, a chunk a task.
void token_tiles(Func f, const Var &x, const Var &t, const Var &h, const Var &b, int chunk, int vec, int rows) {
    Tiled tiled = register_tiles(f, x, t, vec, rows);
    Var task("task");
    tiled.out.split(tiled.y_tiles, task, tiled.y_tiles, chunk / rows).parallel(task).parallel(h).parallel(b);
}

// A copy of `f` (x, y, ...) for `consumer`, at root, transposed: y innermost,
// the operand a vectorized sum reads as vectors. Squares of vec x vec move
// through registers (shuffles), not an element at a time.
void transposed_for(Func f, Func consumer, const Var &x, const Var &y, const Var &h, const Var &b, int vec) {
    Func copy = f.in(consumer);
    Var xo("xo"), yo("yo"), xi("xi"), yi("yi");
    copy.compute_root()
        .reorder_storage(y, x)
        .tile(y, x, yo, xo, yi, xi, vec, vec, TailStrategy::GuardWithIf)
        .vectorize(yi)
        .unroll(xi)
        .parallel(h)
        .parallel(b);
}

constexpr int tile_rows = 8;

void schedule_factors(FeatureFactors &f, const RandomFeatureVars &v, int chunk, int vec) {
    f.inv_sigma.compute_root();
    f.quarter_norm.compute_root();
    f.u.compute_root();
    by_tokens(f.u, v.d, v.t, v.h, v.b, chunk, vec);
    // W with m innermost: the projection's vectors of features.
    Func w = f.frequencies.in(f.projection);
    const std::vector<Var> d_m_h = w.args();
    w.compute_root().reorder_storage(d_m_h[1], d_m_h[0], d_m_h[2]).reorder(d_m_h[1], d_m_h[0], d_m_h[2]);
    w.vectorize(d_m_h[1], vec, TailStrategy::GuardWithIf);
    token_tiles(f.projection, v.m, v.t, v.h, v.b, chunk, vec, tile_rows);
    // x and its ones column, copied once: read in place, its clamp on d made the
    // state's tiles gather.
    vectorized_by_chunks(f.values, v.d, v.t, v.h, v.b, chunk, vec);
    by_chunks(f.norm, v.t, v.h, v.b, chunk);
    by_chunks(f.shift, v.t, v.h, v.b, chunk);
    vectorized_by_chunks(f.rho, v.m, v.t, v.h, v.b, chunk, vec);
    vectorized_by_chunks(f.kappa, v.m, v.t, v.h, v.b, chunk, vec);
}

// A state (m, d, c, h, b): each chunk's sums in register tiles (d vectorized,
// features unrolled), a chunk a task, d innermost; the scan in order within a
// (head, batch), vectorized over d.
void schedule_state(Func per_chunk, Func state, const RandomFeatureVars &v, RVar chunks, int vec) {
    Tiled tiled = register_tiles(per_chunk, v.d, v.m, vec, tile_rows);
    tiled.out.reorder(tiled.x_tiles, tiled.y_tiles, v.c).parallel(v.c).parallel(v.h).parallel(v.b);
    state.compute_root().reorder_storage(v.d, v.m, v.c).reorder(v.d, v.m, v.c);
    state.vectorize(v.d, vec, TailStrategy::GuardWithIf).parallel(v.h).parallel(v.b);
    state.update().reorder(v.d, v.m, chunks, v.h, v.b).vectorize(v.d, vec, TailStrategy::GuardWithIf);
    state.update().parallel(v.h).parallel(v.b);
}

// A segment's state in or out (d, m, h, b), at root where it is produced.
void state_copy(Func f, const RandomFeatureVars &v, int vec) {
    f.vectorize(v.d, vec, TailStrategy::GuardWithIf).parallel(v.h).parallel(v.b);
}

}  // namespace

void schedule_random_feature_states_cpu(RandomFeatureStatesPipeline &p, const CpuRandomFeatureKnobs &k) {
    const RandomFeatureVars &v = p.v;
    const int vec = k.vector, chunk = p.chunk;
    schedule_factors(p.f, v, chunk, vec);  // of which rho and its shift are not in this pipeline
    schedule_state(p.chunk_state, p.state, v, p.chunks.x, vec);
    state_copy(p.state_out, v, vec);
}

void schedule_random_feature_forward_cpu(RandomFeaturePipeline &p, const CpuRandomFeatureKnobs &k) {
    const RandomFeatureVars &v = p.v;
    const int vec = k.vector, chunk = p.chunk;
    schedule_factors(p.f, v, chunk, vec);
    schedule_state(p.chunk_state, p.state, v, p.chunks.x, vec);
    state_copy(p.state_out, v, vec);
    transposed_for(p.f.kappa, p.key_product, v.m, v.t, v.h, v.b, vec);
    token_tiles(p.key_product, v.j, v.t, v.h, v.b, chunk, vec, tile_rows);
    token_tiles(p.numerator, v.d, v.t, v.h, v.b, chunk, vec, tile_rows);
    by_tokens(p.y, v.d, v.t, v.h, v.b, chunk, vec);
    p.lse.parallel(v.h).parallel(v.b);
}

void schedule_random_feature_backward_cpu(RandomFeatureBackwardPipeline &p, const CpuRandomFeatureKnobs &k) {
    const RandomFeatureVars &v = p.v;
    const int vec = k.vector, chunk = p.chunk;
    schedule_factors(p.f, v, chunk, vec);
    by_chunks(p.row_dot, v.t, v.h, v.b, chunk);
    by_chunks(p.inv_row_sum, v.t, v.h, v.b, chunk);
    vectorized_by_chunks(p.outer, v.d, v.t, v.h, v.b, chunk, vec);
    schedule_state(p.chunk_state, p.state, v, p.chunks.x, vec);
    schedule_state(p.chunk_query_state, p.query_state, v, p.chunks.x, vec);
    state_copy(p.query_state_out, v, vec);
    transposed_for(p.f.kappa, p.key_product, v.m, v.t, v.h, v.b, vec);
    token_tiles(p.key_product, v.j, v.t, v.h, v.b, chunk, vec, tile_rows);
    transposed_for(p.f.values, p.pair_gradient, v.d, v.t, v.h, v.b, vec);
    token_tiles(p.pair_gradient, v.j, v.t, v.h, v.b, chunk, vec, tile_rows);
    transposed_for(p.state, p.query_gradient, v.d, v.m, v.h, v.b, vec);
    token_tiles(p.query_gradient, v.m, v.t, v.h, v.b, chunk, vec, tile_rows);
    transposed_for(p.query_state, p.key_gradient, v.d, v.m, v.h, v.b, vec);
    token_tiles(p.key_gradient, v.m, v.t, v.h, v.b, chunk, vec, tile_rows);
    token_tiles(p.value_gradient, v.d, v.t, v.h, v.b, chunk, vec, tile_rows);
    vectorized_by_chunks(p.exponent_gradient, v.m, v.t, v.h, v.b, chunk, vec);
    by_chunks(p.exponent_gradient_sum, v.t, v.h, v.b, chunk);
    by_chunks(p.sigma_term, v.t, v.h, v.b, chunk);
    token_tiles(p.frequency_term, v.d, v.t, v.h, v.b, chunk, vec, tile_rows);
    by_tokens(p.dx, v.d, v.t, v.h, v.b, chunk, vec);
    // dW (d, m, h): tiles of d and features, summed over every token of the head.
    Tiled dw = register_tiles(p.frequency_gradient, v.d, v.m, vec, tile_rows);
    dw.out.parallel(dw.y_tiles).parallel(v.h);
    p.dfrequencies.vectorize(v.d, vec, TailStrategy::GuardWithIf).parallel(v.h);
    p.dsigma.compute_root();
}

}  // namespace gka
