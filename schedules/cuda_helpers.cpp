#include "cuda_helpers.h"

#include "schedule_helpers.h"

namespace gka::cuda {

using namespace Halide;

void schedule_token_rows(Func f, const Vars &v, int threads) {
    Var to("to"), ti("ti");
    f.compute_root().gpu_tile(v.t, to, ti, threads, TailStrategy::GuardWithIf).gpu_blocks(to, v.h, v.b);
    for (int u = 0; u < f.num_update_definitions(); u++) {
        // The reduction (over the head dim) runs serially inside each thread.
        f.update(u).gpu_tile(v.t, to, ti, threads, TailStrategy::GuardWithIf).gpu_blocks(to, v.h, v.b);
    }
}

void schedule_band_sum(BandSum s, const Vars &v, const Expr &head_dim) {
    const bool constant_d = constant_head_dim(head_dim) > 0;
    // What the consumers read: wrappers written once per thread, at the end.
    Func sum_out = s.sum.in(), stats_out = s.stats.in();
    sum_out.compute_root().reorder(v.d, v.offset, v.band, v.h, v.b).gpu_blocks(v.band, v.h, v.b).gpu_threads(v.offset);
    stats_out.compute_root().reorder(v.offset, v.band, v.h, v.b).gpu_blocks(v.band, v.h, v.b).gpu_threads(v.offset);
    stats_out.compute_with(sum_out, v.offset);
    // The sums themselves: per thread, in registers (for any head dim, a
    // per-thread slice of a device scratch buffer: only a constant size fits
    // in registers).
    const LoopLevel thread(sum_out, v.offset);
    s.sum.compute_at(thread).store_in(constant_d ? MemoryType::Register : MemoryType::Auto);
    s.stats.compute_at(thread).store_in(MemoryType::Register);
    Stage sum = s.sum.update(), stats = s.stats.update();
    sum.reorder(v.d, s.window);
    if (constant_d) {
        // Constant indices everywhere the accumulators are touched, or they
        // become a local-memory array.
        sum_out.unroll(v.d);
        s.sum.unroll(v.d);
        sum.unroll(v.d);
        s.sum.bound_extent(v.d, constant_head_dim(head_dim));
    }
    for (Func f : {s.sum, s.stats}) {
        f.bound_extent(v.offset, 1).bound_extent(v.band, 1).bound_extent(v.h, 1).bound_extent(v.b, 1);
    }
    stats.compute_with(sum, s.window);
}

// One pair a thread at a time: a scalar in a register.
void schedule_pair_term(Func f, const LoopLevel &at) {
    const std::vector<Var> a = f.args();  // (j, i, h, b)
    f.compute_at(at).store_in(MemoryType::Register);
    for (const Var &x : a) f.bound_extent(x, 1);
}

void schedule_pair_dot(Func f, const RDom &rd, const LoopLevel &at, const Expr &head_dim) {
    schedule_pair_term(f, at);
    if (constant_head_dim(head_dim) > 0) f.update().unroll(rd.x);
}

void schedule_token_output(Func out, const Vars &v, int tokens_per_block) {
    // 32 head-dim elements a warp row (coalesced), any head dim looped over.
    Var to("to"), ti("ti"), dd("dd");
    out.split(v.d, dd, v.d, 32, TailStrategy::GuardWithIf)
        .split(v.t, to, ti, tokens_per_block, TailStrategy::GuardWithIf)
        .reorder(v.d, ti, dd, to, v.h, v.b)
        .gpu_blocks(to, v.h, v.b)
        .gpu_threads(v.d, ti);
}

}  // namespace gka::cuda
