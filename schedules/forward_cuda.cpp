// CUDA schedule of the GKA forward (generators/gka_forward.h).
//
// One block per (band of queries, head, batch), one thread per query: each
// thread walks its band's key window serially and keeps its D accumulators of
// sum_j exp(s_ij) x_j (and the row sum, fused into the same loop) in
// registers, the head-dim loops unrolled when D is a compile-time constant.
// Threads of a warp read the same key at the same time (one broadcast load
// from L1 per warp); the score's dot product and the exponential are computed
// once per pair, by the thread that owns the query. y and lse are then written
// by two small element-wise kernels. No atomics: results are deterministic.
//
// What this first schedule does not do yet (see README, "CUDA"): key tiles are
// not staged in shared memory, and a thread holds one query, so the key loads
// are not amortized over a register tile of queries. Halide places a Func
// computed inside a reduction that runs per thread in that thread's registers
// or local memory, never in shared memory; staging shared key tiles needs the
// reduction at block level with its accumulators striped over warp lanes
// (gpu_lanes, as Halide's apps/conv_layer does), which is the next step.
// Unmeasured: no GPU was available when it was written.
#include "cuda_helpers.h"
#include "schedule_helpers.h"
#include "schedules.h"

namespace gka {

using namespace Halide;

Knobs cuda_forward_knobs() {
    // band: queries a block (one a thread); 64 = two warps, a multiple of the warp.
    return Knobs({{"band", 64}, {"output_tokens", 8}});
}

void schedule_forward_cuda(ForwardPipeline &p, const Knobs &k) {
    const Vars &v = p.v;
    cuda::schedule_token_rows(p.scores.sqnorm, v, 128);
    if (constant_head_dim(p.head_dim) > 0) p.scores.sqnorm.update().unroll(p.scores.rd.x);

    const cuda::BandSum sum{p.weighted_sum, p.row_sum, p.keys.x};
    cuda::schedule_band_sum(sum, v, p.head_dim);
    cuda::schedule_pair_term(p.weight, sum.pair_level());
    cuda::schedule_pair_dot(p.scores.dot, p.scores.rd, sum.pair_level(), p.head_dim);

    cuda::schedule_token_output(p.y, v, k["output_tokens"]);
    Var to("to"), ti("ti");
    p.lse.gpu_tile(v.t, to, ti, 128, TailStrategy::GuardWithIf).gpu_blocks(to, v.h, v.b);
}

}  // namespace gka
