#include "cuda_helpers.h"

#include <stdexcept>

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

void schedule_centre_and_spread(Centre c, Func spread, const Vars &v) {
    Var dout("dout"), din("din"), ho("ho"), hi("hi");
    c.sum.compute_root().gpu_tile(v.d, dout, din, 32, TailStrategy::GuardWithIf).gpu_blocks(dout, v.h, v.b);
    c.sum.update().gpu_tile(v.d, dout, din, 32, TailStrategy::GuardWithIf).gpu_blocks(dout, v.h, v.b);
    spread.gpu_tile(v.h, ho, hi, 32, TailStrategy::GuardWithIf).gpu_blocks(ho, v.b);
    spread.update().gpu_tile(v.h, ho, hi, 32, TailStrategy::GuardWithIf).gpu_blocks(ho, v.b);
}

void schedule_sqnorm(Scores &s, const Vars &v, const Expr &head_dim) {
    schedule_token_rows(s.sqnorm, v, 128);
    if (constant_head_dim(head_dim) > 0) s.sqnorm.update().unroll(s.rd.x);
}

void require_warp_band(int band, const Expr &head_dim) {
    if (band != 32 && constant_head_dim(head_dim) > 0) {
        throw std::invalid_argument("gka CUDA schedule: shared key tiles need band:32 (a block is one warp)");
    }
}

PairLevel schedule_band_sum(BandSum s, const Vars &v, const Expr &head_dim, int block_size,
                            const std::vector<Func> &staged) {
    const int constant_d = constant_head_dim(head_dim);
    // What the consumers read: wrappers written once per thread, at the end.
    Func sum_out = s.sum.in(), stats_out = s.stats.in();
    sum_out.compute_root().reorder(v.d, v.offset, v.band, v.h, v.b).gpu_blocks(v.band, v.h, v.b).gpu_threads(v.offset);
    stats_out.compute_root().reorder(v.offset, v.band, v.h, v.b).gpu_blocks(v.band, v.h, v.b).gpu_threads(v.offset);
    stats_out.compute_with(sum_out, v.offset);
    Stage sum = s.sum.update(), stats = s.stats.update();
    for (Func f : {s.sum, s.stats}) {
        f.bound_extent(v.band, 1).bound_extent(v.h, 1).bound_extent(v.b, 1);
    }
    // The sums themselves, in registers (for any head dim, a per-thread slice
    // of a device scratch buffer: only a constant size fits in registers).
    const MemoryType accumulators = constant_d > 0 ? MemoryType::Register : MemoryType::Auto;
    s.stats.store_in(MemoryType::Register);
    s.sum.store_in(accumulators);
    PairLevel pairs;
    if (constant_d > 0) {
        // Accumulators allocated for the block (one warp: band must be 32) and
        // striped over its lanes (gpu_lanes: each lane owns one offset's
        // registers), so that the tile loop can sit between the block and its
        // lanes; the tile lives in shared memory.
        const LoopLevel block(sum_out, v.band);
        over_lanes(sum_out, v.offset, s.lanes);
        over_lanes(stats_out, v.offset, s.lanes);
        over_lanes(s.sum.compute_at(block), v.offset, s.lanes);
        over_lanes(s.stats.compute_at(block), v.offset, s.lanes);
        over_lanes(sum.reorder(v.d, v.offset, s.in_block, s.block), v.offset, s.lanes);
        over_lanes(stats.reorder(v.offset, s.in_block, s.block), v.offset, s.lanes);
        stats.compute_with(sum, s.in_block);
        for (Func rows : staged) {
            const std::vector<Var> a = rows.args();  // (d, h, t, b)
            Var dt("dt"), dto("dto"), dti("dti");
            rows.compute_at(s.sum, s.block)
                .store_in(MemoryType::GPUShared)
                .bound_extent(a[0], constant_d)
                .bound_extent(a[2], block_size)
                .reorder(a[0], a[2], a[1], a[3])
                .fuse(a[0], a[2], dt)
                .split(dt, dto, dti, 32, TailStrategy::GuardWithIf);  // the warp reads 32 consecutive floats
            over_lanes(rows, dti, s.lanes);
        }
        // A lane's registers for its accumulators and held rows, D each, of
        // the 255 a thread may have: the rest holds the pair's terms, the
        // staged rows' values and addresses (ptxas, D = 64, two rows held:
        // 253 registers in the backward's query pass, no spills). Own rows
        // past that go to shared memory, token innermost (lane l reads word
        // d * 32 + l: no bank conflicts), while the block's shared memory
        // stays within the 48 KiB a kernel has without opting in; any others
        // are read from global memory, a row a lane (32 cache lines a load),
        // every pair.
        constexpr int shared_budget = 48 * 1024;
        const int row_bytes = (constant_d + s.row_padding) * 4;
        int registers_left = s.held_register_budget / constant_d - 1;
        int shared_left = shared_budget - int(staged.size()) * block_size * row_bytes;
        for (Func rows : s.own_rows) {
            const std::vector<Var> a = rows.args();  // (d, h, t, b)
            if (registers_left > 0) {
                registers_left--;
                rows.compute_at(block).store_in(MemoryType::Register).unroll(a[0]);
            } else if (shared_left >= 32 * row_bytes) {
                shared_left -= 32 * row_bytes;
                rows.compute_at(block).store_in(MemoryType::GPUShared);
                if (s.row_padding > 0) {
                    rows.bound_storage(a[0], constant_d + s.row_padding);
                } else {
                    rows.reorder_storage(a[2], a[0], a[1], a[3]);
                }
            } else {
                continue;
            }
            rows.bound_extent(a[0], constant_d).bound_extent(a[2], 32).reorder(a[0], a[2], a[1], a[3]);
            over_lanes(rows, a[2], s.lanes);
        }
        pairs = {LoopLevel(s.sum, s.in_block), 32, s.own_token, s.lanes};
    } else {
        const LoopLevel thread(sum_out, v.offset);
        s.sum.compute_at(thread);
        s.stats.compute_at(thread);
        for (Func f : {s.sum, s.stats}) f.bound_extent(v.offset, 1);
        sum.reorder(v.d, s.in_block, s.block);
        stats.reorder(s.in_block, s.block);
        stats.compute_with(sum, s.in_block);
        pairs = {LoopLevel(s.sum, s.in_block), 0, s.own_token};
    }
    if (constant_d > 0) {
        // Constant indices everywhere the accumulators are touched, or they
        // become a local-memory array.
        sum_out.unroll(v.d);
        s.sum.unroll(v.d);
        sum.unroll(v.d);
        s.sum.bound_extent(v.d, constant_d);
    }
    return pairs;
}

// One pair a thread at a time, a scalar in a register; or one pair a lane.
// `extra`: a further dimension of the term (a Var and its extent) and its extent.
void schedule_pair_term(Func f, const PairLevel &at, std::pair<Var, int> extra) {
    f.compute_at(at.at).store_in(MemoryType::Register);
    std::vector<Var> a;  // (j, i, h, b) in that order, whatever else f has
    for (const Var &x : f.args()) {
        if (extra.second > 0 && x.same_as(extra.first)) {
            f.bound_extent(x, extra.second);
        } else {
            a.push_back(x);
        }
    }
    const Var own = a[at.own_token], other = a[1 - at.own_token];
    for (const Var &x : a) f.bound_extent(x, x.same_as(own) && at.lanes ? at.lanes : 1);
    if (at.lanes) {
        over_lanes(f.reorder_storage(own, other), own, at.lane_loops);  // a lane's slot: its token
        for (int u = 0; u < f.num_update_definitions(); u++) {
            over_lanes(f.update(u).reorder(own, other), own, at.lane_loops);
        }
    }
}

PairDot split_pair_dot(Func f, const RDom &rd, const Expr &head_dim) {
    PairDot dot{f, f, RVar(rd.x), RVar(), Var("chain"), 0, constant_head_dim(head_dim)};
    if (dot.head_dim > 0 && dot.head_dim % dot_chains == 0) {
        dot.inner = RVar("dot_inner");
        dot.outer = RVar("dot_outer");
        dot.chains = dot_chains;
        dot.terms = f.update().split(rd.x, dot.outer, dot.inner, dot_chains).rfactor(dot.inner, dot.chain);
    }
    return dot;
}

void schedule_pair_dot(PairDot dot, const PairLevel &at) {
    schedule_pair_term(dot.sum, at);
    if (dot.chains == 0) {
        if (dot.head_dim > 0) dot.sum.update().unroll(dot.outer);
        return;
    }
    dot.sum.update().unroll(dot.inner);
    schedule_pair_term(dot.terms, at, {dot.chain, dot.chains});
    // Inside each lane's loop, as every loop of a pair term (one lane loop, no barrier between steps).
    const Var own = dot.sum.args()[at.own_token], other = dot.sum.args()[1 - at.own_token];
    dot.terms.reorder(dot.chain, own, other).unroll(dot.chain);
    dot.terms.update().reorder(dot.chain, dot.outer, own, other).unroll(dot.chain).unroll(dot.outer);
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
