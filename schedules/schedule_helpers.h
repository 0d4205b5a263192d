// Scheduling idioms shared by the GKA kernels' CPU schedules.
#pragma once

#include <optional>
#include <vector>

#include "../generators/gka_math.h"

namespace gka {

// A copy of the block of `f` (d, h, t, b) that `consumers` read in one
// iteration of `at` (`block` tokens), stored transposed (tokens innermost) so
// that consecutive tokens load as one vector; small, and reused from L1 by
// every micro-block.
void transposed_block_copy(Halide::Func f, const std::vector<Halide::Func> &consumers,
                           const Halide::LoopLevel &at, int block, int vec);

// A whole copy of `f` (d, h, t, b) with each head's tokens contiguous, which
// every reader of f then reads instead. A block of tokens becomes one dense run:
// in f its rows are H*D floats apart, a large power of two that maps them to the
// same few cache sets, and the per-block copies that worked around it missed L1.
// (Causal forward, interleaved A/B: D=64 -10% time, D=128 -30%.)
Halide::Func head_major(Halide::Func f, int vec);
// `f` itself (d, h, t, b), computed at `at` for a block of `tokens` tokens and
// laid out as head_major's copy; of a constant size, so that it is not sized at
// run time and malloc'ed and freed once per block.
void head_major_block(Halide::Func f, const Halide::LoopLevel &at, int tokens, int vec);

// The features' centre (d, h, b), computed once at root: a few tokens a head.
void schedule_centre(Centre c, const Vars &v, int vec);

// A dot product of each token's features over the head dim, f (t, h, b) with
// one update over one RDom: |x_t|^2, Dl_t = dy_t . y_t.
void schedule_token_dot(Halide::Func f, const Vars &v, const Halide::Expr &head_dim, int vec);

// A reduction over a band's window (Mask): `sum` (d, offset, band, h, b) and its
// scalar companion `stats` (offset, band, h, b), both updated over the window's
// blocks (`block`, r.y of Mask::window) and the tokens in a block (`in_block`, r.x).
struct BandSum {
    Halide::Func sum, stats;
    Halide::RVar block, in_block;
    // Set where the sum goes by key pairs (Mask::pair_window: in_block the pair,
    // `pair` its key), each a bfloat16 dot product of two keys' products.
    std::optional<Halide::RVar> pair;
    Halide::Var score_block{"os"};  // pair tiles are computed per score block: tile_level()
    Halide::LoopLevel tile_level() const { return Halide::LoopLevel(sum, score_block); }
};

// The sums of one band, computed at `at` (a loop over bands of their consumer).
// The window goes block by block; in each, the band's offsets go by score
// blocks of `score_tile` (pair tiles are computed per score block, at
// tile_level), and in those by micro-blocks of `tile`, each accumulating
// d_block x tile values (vectorized over d) in registers across the block. The
// stats are vectorized over the offsets of a score block. A block is thus read
// once per band, from cache. A head dim fixed at compile time gets fully
// unrolled d loops; any other, micro-tiles of whole d blocks (split_head_dim,
// padded) summed apart per block.
void schedule_band_sum(BandSum &s, const Vars &v, const Halide::Expr &head_dim, int vec, int score_tile, int tile,
                       int d_block, const Halide::LoopLevel &at);

// Splits the head dim d of an update into blocks of d_block (`blocks` the outer
// loop), puts the loops in `order` (innermost first, d and blocks among them),
// and vectorizes d. Each block is whole and unrolled (LLVM then keeps its
// accumulators in registers) where the head dim is fixed at compile time, or
// where `padded`: the update reads features defined past the head dim
// (clamped), so that the last block may run past it; otherwise the edge is
// guarded, and the accumulators live in memory. Returns the block's size.
int split_head_dim(Halide::Stage s, const Halide::Var &d, const Halide::Var &blocks, const Halide::Expr &head_dim,
                   int vec, int d_block, const std::vector<Halide::VarOrRVar> &order, bool padded);

// A micro-tile of a sum, f(d, across, ...) += ..., computed at `at`: d_block x
// across accumulators of a constant size (one of each other dimension),
// vectorized over d and unrolled, in registers across the update's loops
// (`order`, innermost first, d and across among them). Returns the update.
Halide::Stage schedule_micro_tile(Halide::Func f, const Halide::LoopLevel &at,
                                  const std::vector<Halide::VarOrRVar> &order, int d_block, int across, int vec);

// The head dim if the generator fixed it at compile time, else 0.
int constant_head_dim(const Halide::Expr &head_dim);

// A GEMM tile f(lanes, across) += a(rd, lanes) * b(rd, across), computed per
// window block at `at`: vectorized over `lanes` (lane_extent of them) and
// unrolled over `across` (across_extent), across_chunk columns a pass over the
// head dim; stored and initialized as a pair tile (schedule_pair_tile).
// across_chunk must divide across_extent, or be at least across_extent.
// feature_pairs (Scores::feature_pairs: rd is (pair, dp)): a pair's two
// products side by side, reduced into one lane, a bfloat16 dot product.
void schedule_score_tile(Halide::Func f, const Halide::RDom &rd, const Halide::Var &lanes,
                         const Halide::Var &across, const Halide::LoopLevel &at, int lane_extent,
                         int across_extent, int vec, int across_chunk, bool feature_pairs = false);

// Copies of features by pairs of d (pair, dp, h, t, b: gka_math.h,
// feature_pairs) for the GEMMs of Scores::feature_pairs: the `tokens` tokens
// read in one iteration of `at` stored a pair's tokens innermost (a vector of
// tokens' pairs is one load of a GEMM's `lanes`); or as the features lie, a
// pair one 32-bit word (broadcast as a GEMM's `across`), a block of `tokens`
// at `at`, or (LoopLevel::root(), tokens 0) every token, heads in parallel.
void transposed_pairs(Halide::Func f, const Halide::LoopLevel &at, int tokens, int vec);
void pairs_as_they_lie(Halide::Func f, const Halide::LoopLevel &at, int tokens, int vec);

// A whole copy of tokens by pairs (pair, d, h, p, b: gka_math.h's
// token_pairs; or (pair, d, term, h, p, b), terms of several features, unrolled),
// head-major as head_major's, a pair's two tokens interleaved: a vector of d
// of a pair (and term) is one load of a bfloat16 dot product.
void head_major_token_pairs(Halide::Func f, int vec);

// A tile of pair terms rounded to bfloat16 by token pairs (pair, ..., h, b:
// gka_math.h's key_pairs_bf16) of `lane_extent` x `across_extent`, one head:
// stored a pair innermost, then the lanes (vectorized), then `term` where set
// (two terms of one reduction, unrolled), then across: a pair is one 32-bit
// word to broadcast.
struct BF16Pairs {
    Halide::Func f;
    Halide::Var lanes;
    int lane_extent;
    Halide::Var across;
    int across_extent;
    std::optional<Halide::Var> term;
};
void schedule_bf16_pairs(BF16Pairs tile, const Halide::LoopLevel &at, int vec);

// A tile of pair terms f (j, i, h, b), computed at `at` (beside the GEMM tiles
// it reads) and stored as they are: `lanes` (lane_extent of them) innermost and
// vectorized; one head of one batch, so that it has a constant size (no malloc
// per tile).
void schedule_pair_tile(Halide::Func f, const Halide::Var &lanes, const Halide::Var &across,
                        const Halide::LoopLevel &at, int lane_extent, int across_extent, int vec);

// An output (d, h, t, b): blocks of tokens in parallel, vectorized over d.
void schedule_token_output(Halide::Func out, const Vars &v, int vec);

}  // namespace gka
