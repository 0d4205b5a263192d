// CPU schedule of random-feature GKA, forward and backward
// (generators/gka_random_features.h).
//
// Every sum is a GEMM over tokens, features m or the head dim, computed at
// root, a chunk of tokens a task and every (head, batch) in parallel, and
// vectorized over the dimension its operands hold contiguous:
// - the factors rho and kappa (m, t) innermost m, so that a token's features
//   load as vectors; a transposed copy of kappa (t innermost) for the chunk's
//   C x C products, vectorized over its keys;
// - the states (m, d, c) stored d innermost, so that a query's numerator
//   (and the value path) adds a row of the state per feature as vectors; a
//   transposed copy where a sum runs over d for each feature (the backward's
//   exponent gradients). The states are 1/C the size of the tokens' work, so
//   the copies cost little;
// - the prefix sums over chunks run in order within a (head, batch),
//   vectorized over d.
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
}

// Each stage of a sum f over (x, t, h, b), vectorized over x, a chunk of tokens a task.
void vectorized_by_chunks(Func f, const Var &x, const Var &t, const Var &h, const Var &b, int chunk, int vec) {
    by_chunks(f, t, h, b, chunk);
    f.vectorize(x, vec, TailStrategy::GuardWithIf);
    for (int k = 0; k < f.num_update_definitions(); k++) {
        Var chunk_of("chunk_of");
        f.update(k)
            .split(t, chunk_of, t, chunk, TailStrategy::GuardWithIf)
            .parallel(chunk_of)
            .parallel(h)
            .parallel(b)
            .vectorize(x, vec, TailStrategy::GuardWithIf);
    }
}

void schedule_factors(FeatureFactors &f, const RandomFeatureVars &v, int chunk, int vec) {
    f.inv_sigma.compute_root();
    f.quarter_norm.compute_root();
    f.u.compute_root().vectorize(v.d, vec, TailStrategy::GuardWithIf).parallel(v.t, chunk, TailStrategy::GuardWithIf).parallel(v.h).parallel(v.b);
    vectorized_by_chunks(f.projection, v.m, v.t, v.h, v.b, chunk, vec);
    by_chunks(f.norm, v.t, v.h, v.b, chunk);
    by_chunks(f.shift, v.t, v.h, v.b, chunk);
    vectorized_by_chunks(f.rho, v.m, v.t, v.h, v.b, chunk, vec);
    vectorized_by_chunks(f.kappa, v.m, v.t, v.h, v.b, chunk, vec);
}

// A state (m, d, c, h, b): the chunks' sums d innermost, a chunk a task; the
// scan in order within a (head, batch), vectorized over d.
void schedule_state(Func per_chunk, Func state, const RandomFeatureVars &v, RVar in_chunk, RVar chunks, int vec) {
    per_chunk.compute_root()
        .reorder_storage(v.d, v.m, v.c)
        .reorder(v.d, v.m, v.c)
        .vectorize(v.d, vec, TailStrategy::GuardWithIf)
        .parallel(v.c)
        .parallel(v.h)
        .parallel(v.b);
    per_chunk.update()
        .reorder(v.d, v.m, in_chunk, v.c)
        .vectorize(v.d, vec, TailStrategy::GuardWithIf)
        .parallel(v.c)
        .parallel(v.h)
        .parallel(v.b);
    state.compute_root().reorder_storage(v.d, v.m, v.c).reorder(v.d, v.m, v.c).vectorize(v.d, vec, TailStrategy::GuardWithIf);
    state.parallel(v.h).parallel(v.b);
    state.update().reorder(v.d, v.m, chunks, v.h, v.b).vectorize(v.d, vec, TailStrategy::GuardWithIf).parallel(v.h).parallel(v.b);
}

}  // namespace

void schedule_random_feature_forward_cpu(RandomFeaturePipeline &p, const CpuRandomFeatureKnobs &k) {
    const RandomFeatureVars &v = p.v;
    const int vec = k.vector, chunk = p.chunk;
    schedule_factors(p.f, v, chunk, vec);
    schedule_state(p.chunk_state, p.state, v, p.in_chunk.x, p.chunks.x, vec);
    vectorized_by_chunks(p.key_product, v.j, v.t, v.h, v.b, chunk, vec);
    vectorized_by_chunks(p.numerator, v.d, v.t, v.h, v.b, chunk, vec);
    p.y.vectorize(v.d, vec, TailStrategy::GuardWithIf).parallel(v.t, chunk, TailStrategy::GuardWithIf).parallel(v.h).parallel(v.b);
    p.lse.parallel(v.h).parallel(v.b);
}

void schedule_random_feature_backward_cpu(RandomFeatureBackwardPipeline &p, const CpuRandomFeatureKnobs &k) {
    const RandomFeatureVars &v = p.v;
    const int vec = k.vector, chunk = p.chunk;
    schedule_factors(p.f, v, chunk, vec);
    by_chunks(p.row_dot, v.t, v.h, v.b, chunk);
    by_chunks(p.inv_row_sum, v.t, v.h, v.b, chunk);
    vectorized_by_chunks(p.outer, v.d, v.t, v.h, v.b, chunk, vec);
    schedule_state(p.chunk_state, p.state, v, p.in_chunk.x, p.chunks.x, vec);
    schedule_state(p.chunk_query_state, p.query_state, v, p.in_chunk.x, p.chunks.x, vec);
    vectorized_by_chunks(p.key_product, v.j, v.t, v.h, v.b, chunk, vec);
    vectorized_by_chunks(p.pair_gradient, v.j, v.t, v.h, v.b, chunk, vec);
    vectorized_by_chunks(p.query_gradient, v.m, v.t, v.h, v.b, chunk, vec);
    vectorized_by_chunks(p.key_gradient, v.m, v.t, v.h, v.b, chunk, vec);
    vectorized_by_chunks(p.value_gradient, v.d, v.t, v.h, v.b, chunk, vec);
    vectorized_by_chunks(p.exponent_gradient, v.m, v.t, v.h, v.b, chunk, vec);
    by_chunks(p.exponent_gradient_sum, v.t, v.h, v.b, chunk);
    by_chunks(p.sigma_term, v.t, v.h, v.b, chunk);
    vectorized_by_chunks(p.frequency_term, v.d, v.t, v.h, v.b, chunk, vec);
    p.dx.vectorize(v.d, vec, TailStrategy::GuardWithIf).parallel(v.t, chunk, TailStrategy::GuardWithIf).parallel(v.h).parallel(v.b);
    p.dfrequencies.compute_root().vectorize(v.d, vec, TailStrategy::GuardWithIf).parallel(v.h);
    p.dfrequencies.update().vectorize(v.d, vec, TailStrategy::GuardWithIf).parallel(v.m).parallel(v.h);
    p.dsigma.compute_root();
}

}  // namespace gka
