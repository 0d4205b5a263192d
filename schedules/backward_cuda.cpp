// CUDA schedule of the GKA backward (generators/gka_backward.h).
//
// The two passes of the CPU schedule, each shaped like the CUDA forward
// (forward_cuda.cpp): one block per band, one thread per token.
// - by query: each thread walks the keys of its query's band and keeps
//   sum_j dS_ij x_j (registers) and the scalar sums of dS and dS*s (fused);
// - by key: each thread walks the queries of its key's band and keeps
//   sum_i dS_ij x_i / sigma^2 + P_ij dy_i and sum_i dS_ij.
// dx is then an element-wise kernel, and dsigma one block per head summing the
// query pass's dS*s over every token in a fixed order. Every output element is
// written by one thread in a fixed order: no atomics, deterministic results.
// Same limits as the forward (no shared-memory key tiles yet); unmeasured.
#include "cuda_helpers.h"
#include "schedule_helpers.h"
#include "schedules.h"

namespace gka {

using namespace Halide;

Knobs cuda_backward_knobs() { return Knobs({{"band", 64}, {"output_tokens", 8}}); }

void schedule_backward_cuda(BackwardPipeline &p, const Knobs &k) {
    const Vars &v = p.v;
    const bool constant_d = constant_head_dim(p.head_dim) > 0;
    cuda::schedule_token_rows(p.delta, v, 128);
    for (Scores *s : {&p.by_query.scores, &p.by_key.scores}) {
        cuda::schedule_token_rows(s->sqnorm, v, 128);
        if (constant_d) s->sqnorm.update().unroll(s->rd.x);
    }

    const cuda::BandSum by_query{p.query_sum, p.query_stats, p.keys.x};
    const cuda::BandSum by_key{p.key_sum, p.key_stats, p.queries.x};
    for (auto [sum, terms] : {std::pair{by_query, &p.by_query}, std::pair{by_key, &p.by_key}}) {
        const cuda::PairLevel pairs = cuda::schedule_band_sum(sum, v, p.head_dim);
        cuda::schedule_pair_term(terms->dscore, pairs);
        cuda::schedule_pair_term(terms->prob, pairs);
        cuda::schedule_pair_dot(terms->scores.dot, terms->scores.rd, pairs, p.head_dim);
        cuda::schedule_pair_dot(terms->dprob, terms->scores.rd, pairs, p.head_dim);
    }

    // dsigma: one block per head, one thread summing every token in order.
    Var ho("ho"), hi("hi");
    p.dsigma_sum.compute_root().gpu_tile(v.h, ho, hi, 1);
    p.dsigma_sum.update().gpu_tile(v.h, ho, hi, 1);
    p.dsigma.gpu_tile(v.h, ho, hi, 32, TailStrategy::GuardWithIf);

    cuda::schedule_token_output(p.dx, v, k["output_tokens"]);
}

}  // namespace gka
