// Scheduling idioms shared by the GKA kernels' CUDA schedules (forward_cuda.cpp,
// backward_cuda.cpp).
#pragma once

#include "../generators/gka_math.h"
#include "knobs.h"

namespace gka::cuda {

// Every Func a CUDA pipeline computes runs on the device: a Func left without a
// GPU loop would run on the host and make Halide copy device buffers there.

// A per-token Func f(t, h, b) (and its update over the head dim, if any): one
// thread per token, blocks of `threads` tokens by head and batch.
void schedule_token_rows(Halide::Func f, const Vars &v, int threads);

// The features' centre (d, h, b): one thread per element; and the spread
// (h, b), max_t |c_t|^2: one thread per head and batch, over every token.
void schedule_centre_and_spread(Centre c, Halide::Func spread, const Vars &v);

// |x_t|^2: one thread per token, the head dim unrolled when it is constant.
void schedule_sqnorm(Scores &s, const Vars &v, const Halide::Expr &head_dim);

// Loops over a warp's lanes: gpu_lanes, or threads where the target's GPU API
// has no lanes (knobs.h, LaneLoops).
template<typename FuncOrStage>  // handles: a copy schedules the same Func
void over_lanes(FuncOrStage f, const Halide::VarOrRVar &v, LaneLoops lanes) {
    if (lanes == LaneLoops::warp) {
        f.gpu_lanes(v);
    } else {
        f.gpu_threads(v);
    }
}

// The shared-memory schedule of schedule_band_sum runs a band as one warp: with
// a constant head dim, `band` must be 32.
void require_warp_band(int band, const Halide::Expr &head_dim);

// A reduction over a band's window (Mask), `sum` (d, offset, band, h, b) with
// its scalar companion `stats` (offset, band, h, b), updated over the window's
// blocks (`block`, r.y of Mask::window) and the tokens in a block (`in_block`,
// r.x): one block per (band, head, batch), one thread per band offset. Each
// thread keeps its accumulators in registers (the head dim unrolled when it is
// a compile-time constant) and `stats` is fused into the same loop
// (compute_with): every pair term is computed once, by one thread, in a fixed
// order. No atomics: results are deterministic. With a constant head dim, the
// block is one warp (band = 32) and `staged`, the per-token rows every thread
// reads (wrappers of the features made with Func::in), are copied into shared
// memory once a window block (of `block_size` tokens) by the whole warp; any
// other head dim reads the rows from global memory, thread by thread.
// `own_rows`: rows (d, h, t, b) of the band's own tokens that every pair
// reads, most read first; with a constant head dim each lane holds its
// token's rows in registers for the whole band instead of loading them once
// a pair, as many as leave room for its accumulators (held_register_budget).
// Returns where pair terms are computed.
struct BandSum {
    Halide::Func sum, stats;
    Halide::RVar block, in_block;
    int own_token;  // which argument of a pair term (j, i, h, b) is the band's token: 1 (i) or 0 (j)
    std::vector<Halide::Func> own_rows = {};
    LaneLoops lanes = LaneLoops::warp;
    // How own rows in shared memory are laid out: 0, token innermost (a lane
    // reads one word a step); 2 or 4, each token's row whole, padded by that
    // many words, so that a lane reads 2 or 4 words at once (LLVM merges the
    // loads) and a warp's vector loads hit distinct banks (its lanes' rows
    // start 2 or 4 banks apart).
    int row_padding = 0;
    // A lane's registers for its accumulators and held own rows; the rest hold
    // the pair's terms (more of them for kernels whose terms take a square root
    // or a division: backward_cuda.cpp).
    int held_register_budget = 192;
};
struct PairLevel {
    Halide::LoopLevel at;
    int lanes;      // 0: one pair a thread; else the pairs of `lanes` band tokens, one a lane
    int own_token;  // BandSum::own_token
    LaneLoops lane_loops = LaneLoops::warp;
};
PairLevel schedule_band_sum(BandSum s, const Vars &v, const Halide::Expr &head_dim, int block_size,
                            const std::vector<Halide::Func> &staged);

// A pair term f(j, i, h, b) computed per pair at `at`, a scalar a lane.
// `extra`: a further dimension of the term, with its extent.
void schedule_pair_term(Halide::Func f, const PairLevel &at, std::pair<Halide::Var, int> extra = {});

// A pair's dot product over the head dim (an update of `sum` over rd), split
// (rfactor) into dot_chains partial sums where the head dim is a constant
// multiple of it: one pair's FMAs are then dot_chains dependent chains, not
// one of D at 4 cycles a step. `terms` is the Func that reads the operands
// (the partial sums, or `sum` itself unsplit): wrappers of an operand
// (Func::in) are made for it, after the split.
constexpr int dot_chains = 4;
struct PairDot {
    Halide::Func sum, terms;
    Halide::RVar outer, inner;
    Halide::Var chain;
    int chains;    // 0: not split
    int head_dim;  // constant, else 0
};
PairDot split_pair_dot(Halide::Func f, const Halide::RDom &rd, const Halide::Expr &head_dim);
// Computed per pair at `at`, every loop unrolled when the head dim is constant.
void schedule_pair_dot(PairDot dot, const PairLevel &at);

// An output (d, h, t, b): threads over 32 head-dim elements x tokens_per_block
// tokens, blocks of tokens by head and batch; wider head dims loop in the thread.
void schedule_token_output(Halide::Func out, const Vars &v, int tokens_per_block);

}  // namespace gka::cuda
