// GKA forward, algorithm only (docs/spec.md, "Forward"): every Func a schedule needs,
// by name. One pass and no running max: s_ii = 0 is the row maximum, so every
// weight exp(s_ij) is in (0, 1] and each row sum is >= 1.
//
// The self pair's weight, exactly 1, is left out of the sums and added at the
// end: y_i = (x_i + sum_{j != i} w_ij x_j) / (1 + sum_{j != i} w_ij). The sums
// then hold terms of like size, so that a near-one-hot row, whose other
// weights are thousands of times below 1, does not lose them one by one
// against it (their errors would grow with the row's length), and a row whose
// only key is itself gives y_i = x_i and lse_i = 0 exactly.
//
// A chunk (gka.h, gka_forward_chunk) is a block of queries against a block of
// keys of their own (Mask's shift places them): its partial y and lse, over
// its pairs alone. The self pair is among them only where the query's own
// position is among the keys; a row with no pair gives lse = -inf and y = 0.
#pragma once

#include <limits>

#include "gka_math.h"

namespace gka {

struct ForwardPipeline {
    Vars v;
    Expr head_dim;
    Mask mask;
    ScoreForm form;
    Func x;                             // features, clamped past T (d, h, t, b)
    Func values;                        // the keys' features: x, or a chunk's keys (d, h, t, b)
    Centre centre;                      // (d, h, b)
    Func centred{"centred"};            // x - centre (origin form: x)         (d, h, t, b)
    Scores scores;
    RDom keys;                          // the window of a band by blocks (Mask::key_in_window)
    Func weight{"weight"};              // exp(s_ij), 0 where masked and for j = i   (j, i, h, b)
    Func weighted_sum{"weighted_sum"};  // sum_{j != i} exp(s_ij) x_j   (d, offset, band, h, b)
    Func row_sum{"row_sum"};            // sum_{j != i} exp(s_ij)          (offset, band, h, b)
    // With bfloat16 products (define_forward's `bf16_products`), the value sum
    // goes by key pairs: keys 2p and 2p + 1 of a pair side by side.
    bool bf16_products = false;
    Func value_weight;                  // exp(s_ij) rounded to bfloat16  (pair, i, p, h, b): key_pairs_bf16
    Func value_pairs;                   // the keys' bfloat16 features   (pair, d, h, p, b): token_pairs
    Func y, lse, spread;                // the outputs
};

// key_block: the keys a block of a band's window (Mask::window). `keys`: a
// chunk's (the direct form's alone), or undefined: the queries' own tokens.
// bf16_products (bfloat16 features): the value sum multiplies the weights
// rounded to bfloat16 by the features, each product exact, summed in float
// (as bfloat16 dot products do, two keys a step), and the origin form's
// scores take their dot products from the features' pairs likewise (exact
// products: the float kernel's arithmetic); every other product, the scores
// and the row sums are float (docs/accuracy.md, "bfloat16").
// function: the kernel (kernel_terms.h); every one has s_ii = 0 as its row's
// largest score, so the one pass holds for each.
inline void define_forward(ForwardPipeline &p, Func x, Func keys, Func sigma, Expr head_dim, const Mask &mask,
                           int key_block, ScoreForm form, Func y, Func lse, Func spread, bool bf16_products = false,
                           KernelFunction function = KernelFunction::gaussian) {
    const Vars &v = p.v;
    const bool chunk = keys.defined();
    if (chunk && form != ScoreForm::direct) throw std::invalid_argument("gka forward: chunks take scores=direct");
    p.head_dim = head_dim;
    p.mask = mask;
    p.form = form;
    p.x = clamped_features(x, head_dim, mask.seq_len);
    p.values = chunk ? clamped_features(keys, head_dim, mask.key_len) : p.x;
    p.centre = feature_centre(p.x, mask.seq_len, v);
    const Expr features = p.x(v.d, v.h, v.t, v.b);
    p.centred(v.d, v.h, v.t, v.b) = form == ScoreForm::origin ? features : features - p.centre.mean(v.d, v.h, v.b);
    // The bfloat16 features as they are: the values' pairs and, in the origin
    // form, the scores' (bfloat16 products).
    const Func raw = bf16_products ? clamped(x, head_dim, mask.seq_len) : Func();
    if (form != ScoreForm::direct) {
        p.scores = kernel_scores(p.centred, p.centred, p.centred, sigma, head_dim, form, v, function,
                                 form == ScoreForm::origin ? raw : Func());
    } else {
        p.scores = kernel_scores(p.values, p.x, p.centred, sigma, head_dim, form, v, function);
    }
    p.weight(v.j, v.i, v.h, v.b) = Halide::select(mask.allowed(v.i, v.j) && mask.position(v.i) != v.j,
                                                  pair_weight(p.scores, v, p.scores.score(v.j, v.i, v.h, v.b)), 0.0f);

    const Expr query = mask.token(v.band, v.offset);
    Expr key;  // the window's key at the reduction's step
    p.bf16_products = bf16_products;
    if (bf16_products) {
        if (chunk || x.type() != Halide::BFloat(16) || key_block % 2 != 0) {
            throw std::invalid_argument("gka forward: bfloat16 products take bfloat16 features, no chunk, and an even "
                                        "key block");
        }
        p.value_pairs = token_pairs(raw, "value_pairs");
        p.value_weight = key_pairs_bf16(p.weight, "value_weight");
        p.keys = mask.pair_window("k", key_block);
        const Expr key_pair = mask.key_pair_in_window(p.keys, v.band);
        key = 2 * key_pair + p.keys.x;
        p.weighted_sum(v.d, v.offset, v.band, v.h, v.b) +=
            bf16_product(p.value_weight(p.keys.x, query, key_pair, v.h, v.b), p.value_pairs(p.keys.x, v.d, v.h, key_pair, v.b));
    } else {
        p.keys = mask.window("k", key_block);
        key = mask.key_in_window(p.keys, v.band);
        p.weighted_sum(v.d, v.offset, v.band, v.h, v.b) +=
            p.weight(key, query, v.h, v.b) * p.values(v.d, v.h, key, v.b);
    }
    p.row_sum(v.offset, v.band, v.h, v.b) += p.weight(key, query, v.h, v.b);

    const Expr offset = v.t % mask.band_size, band = v.t / mask.band_size;
    const Expr others = p.row_sum(offset, band, v.h, v.b), sum = p.weighted_sum(v.d, offset, band, v.h, v.b);
    if (chunk) {
        // The self pair's weight 1 where the query's own position is a key of the chunk.
        const Expr at = mask.position(v.t);
        const Expr self = Halide::select(at >= 0 && at < mask.key_len, 1.0f, 0.0f), total = self + others;
        y(v.d, v.h, v.t, v.b) =
            as_element_of(y, Halide::select(total == 0.0f, 0.0f, (self * p.x(v.d, v.h, v.t, v.b) + sum) / total));
        // -inf under strict_float: fast math takes no infinities, and this one is a result.
        lse(v.t, v.h, v.b) = Halide::strict_float(
            Halide::select(total == 0.0f, Expr(-std::numeric_limits<float>::infinity()), Halide::log(total)));
    } else {
        y(v.d, v.h, v.t, v.b) = as_element_of(y, (p.x(v.d, v.h, v.t, v.b) + sum) / (1.0f + others));
        lse(v.t, v.h, v.b) = Halide::select(others == 0.0f, 0.0f, Halide::log(1.0f + others));
    }
    define_spread(spread, p.scores, mask.seq_len, v);
    p.y = y;
    p.lse = lse;
    p.spread = spread;
}

}  // namespace gka
