// GKA decode, algorithm only: docs/spec.md's forward for a few new tokens of each
// sequence, against the features of the tokens before them, held in a cache
// (keys and values are the features: a cache of x alone), and against one
// another. Every Func a schedule needs, by name.
//
// Sequence b has L = lengths(b) tokens before the call, at positions 0..L-1,
// and new tokens (queries q) at L..L+Tq-1. Position p lives in cache slot
// p mod capacity: a cache at least as long as the sequence holds it in order,
// and a ring of W - 1 slots or more holds every key a (W-1, 0) window reaches.
// A query's keys are the cached positions [first, L), where first leaves out
// what neither the cache nor the window keeps, and the new tokens up to
// itself; docs/spec.md's mask (Mask::allowed) on positions decides each pair.
//
// Scores in the direct form (ScoreForm::direct): decode reads each key once
// per query, so it waits on memory and the direct form's extra subtraction is
// free, and it meets the accuracy contract on every input without a spread test.
//
// The cached keys go by chunks of `chunk` positions, each summed apart, and
// the chunks' sums are added in order: chunks of every head run in parallel,
// and the results do not depend on the thread count. As in the forward
// (gka_forward.h), the self pair's weight, exactly 1, is left out of the sums
// and added at the end.
#pragma once

#include "gka_math.h"

namespace gka {

struct DecodePipeline {
    Vars v;
    Expr head_dim;
    Func lengths;                       // L (b)
    Func cache, fresh;                  // features, widened: (d, h, slot, b), the new tokens' (d, h, q, b)
    Func key_count{"key_count"}, first_slot{"first_slot"};  // each sequence's cached keys (b)
    Func cached{"cached"};              // the cached keys in order (d, h, k, b)
    Scores cached_scores, fresh_scores; // pairs (k, q, h, b) and (new key, q, h, b)
    Func cached_weight{"cached_weight"}, fresh_weight{"fresh_weight"};  // exp(s), 0 where masked
    RDom cached_keys;                   // the positions of a chunk
    Func chunk_sum{"chunk_sum"};        // sum over a chunk's keys of w_qj x_j   (d, q, chunk, h, b)
    Func chunk_row_sum{"chunk_row_sum"};  // sum over a chunk's keys of w_qj     (q, chunk, h, b)
    RDom fresh_keys;                    // the new tokens before a query
    Func fresh_sum{"fresh_sum"}, fresh_row_sum{"fresh_row_sum"};  // (d, q, h, b), (q, h, b)
    RDom chunks;
    Func weighted_sum{"weighted_sum"}, row_sum{"row_sum"};  // every key but the query: (d, q, h, b), (q, h, b)
    Func y, lse;                        // the outputs (d, h, q, b), (q, h, b)
};

// x: the new tokens' features (d, h, q, b), new_tokens of them; cache
// (d, h, slot, b), capacity slots; left: the window's left span (-1
// unbounded; the right span is 0: the new tokens' future is not there);
// function: the kernel (kernel_terms.h).
inline void define_decode(DecodePipeline &p, Func x, Func cache, Func lengths, Func sigma, Expr left, Expr head_dim,
                          Expr new_tokens, Expr capacity, int chunk, Func y, Func lse,
                          KernelFunction function = KernelFunction::gaussian) {
    const Vars &v = p.v;
    p.head_dim = head_dim;
    p.lengths = lengths;
    p.cache = widened_features(cache);
    p.fresh = widened_features(x);
    const Expr length = lengths(v.b);
    const Mask mask(left, 0, length + new_tokens, 1);  // on positions
    const Expr query = length + v.i;

    // The keys before the first query that its window, the cache and the sequence
    // all hold: how many, and the slot of the first. (Funcs of b, so that a
    // schedule computes them once a sequence, not once a key.)
    const Expr count = Halide::min(mask.left_span, capacity, length);
    p.key_count(v.b) = count;
    p.first_slot(v.b) = (length - count) % capacity;

    // The cached keys in order (k): position L - count + k, in slot
    // (first + k) mod capacity, which wraps at most once (k < count <= capacity):
    // one modulo a sequence, not one a key.
    const Expr unwrapped = p.first_slot(v.b) + v.t;
    const Expr slot = Halide::clamp(Halide::select(unwrapped < capacity, unwrapped, unwrapped - capacity), 0,
                                    capacity - 1);
    p.cached(v.d, v.h, v.t, v.b) = p.cache(v.d, v.h, slot, v.b);
    p.cached_scores = kernel_scores(p.cached, p.fresh, p.fresh, sigma, head_dim, ScoreForm::direct, v, function);
    p.fresh_scores = kernel_scores(p.fresh, p.fresh, p.fresh, sigma, head_dim, ScoreForm::direct, v, function);
    p.cached_weight(v.j, v.i, v.h, v.b) = Halide::select(
        mask.allowed(query, length - p.key_count(v.b) + v.j),
        pair_weight(p.cached_scores, v, p.cached_scores.score(v.j, v.i, v.h, v.b)), 0.0f);
    p.fresh_weight(v.j, v.i, v.h, v.b) = Halide::select(
        mask.allowed(query, length + v.j), pair_weight(p.fresh_scores, v, p.fresh_scores.score(v.j, v.i, v.h, v.b)),
        0.0f);

    // Chunks of cached keys: as many as the longest reach needs.
    const Expr most = Halide::select(left < 0, capacity, Halide::min(left, capacity));
    p.cached_keys = RDom(0, chunk, "cached_keys");
    const Expr key = v.chunk * chunk + p.cached_keys;
    p.cached_keys.where(key < p.key_count(v.b));
    p.chunk_sum(v.d, v.i, v.chunk, v.h, v.b) += p.cached_weight(key, v.i, v.h, v.b) * p.cached(v.d, v.h, key, v.b);
    p.chunk_row_sum(v.i, v.chunk, v.h, v.b) += p.cached_weight(key, v.i, v.h, v.b);

    p.fresh_keys = RDom(0, new_tokens, "fresh_keys");
    p.fresh_keys.where(p.fresh_keys < v.i);
    const Expr fresh_key = p.fresh_keys;
    p.fresh_sum(v.d, v.i, v.h, v.b) += p.fresh_weight(fresh_key, v.i, v.h, v.b) * p.fresh(v.d, v.h, fresh_key, v.b);
    p.fresh_row_sum(v.i, v.h, v.b) += p.fresh_weight(fresh_key, v.i, v.h, v.b);

    p.chunks = RDom(0, (most + chunk - 1) / chunk, "chunks");
    p.weighted_sum(v.d, v.i, v.h, v.b) = p.fresh_sum(v.d, v.i, v.h, v.b);
    p.weighted_sum(v.d, v.i, v.h, v.b) += p.chunk_sum(v.d, v.i, p.chunks, v.h, v.b);
    p.row_sum(v.i, v.h, v.b) = p.fresh_row_sum(v.i, v.h, v.b);
    p.row_sum(v.i, v.h, v.b) += p.chunk_row_sum(v.i, p.chunks, v.h, v.b);

    const Expr others = p.row_sum(v.t, v.h, v.b);
    y(v.d, v.h, v.t, v.b) =
        as_element_of(y, (p.fresh(v.d, v.h, v.t, v.b) + p.weighted_sum(v.d, v.t, v.h, v.b)) / (1.0f + others));
    lse(v.t, v.h, v.b) = Halide::select(others == 0.0f, 0.0f, Halide::log(1.0f + others));
    p.y = y;
    p.lse = lse;
}

}  // namespace gka
