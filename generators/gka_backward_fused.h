// GKA backward in one pass over the pairs, algorithm only (docs/spec.md, "Backward").
// Each pair term is computed once and feeds both directions, as in
// FlashAttention-2's backward: for each band of keys, the queries of its window
// go by blocks, and each pair's dS and P are added both to its key's sums
// (the key and value paths) and to its query's sum (the query path). The two
// directions' sums are updated over the same reduction domain, in the same
// order, so that a schedule can fuse them (compute_with) and keep one tile of
// pair terms for both. The order is fixed: the results are deterministic.
// (gka_backward.h walks the pairs twice, once per direction, and computes each
// pair term twice: 7 GEMM-sized products for docs/spec.md's 5.)
//
// The key bands are dealt round-robin to `groups` groups (1 when batch x heads
// gives enough tasks), each with sums of its own, added at the end, so that
// the pairs of one head can be summed by several tasks without a race: a
// head's queries take terms from every key band. The groups depend on the
// shape only, never on the thread count: the results do not either.
//
// Centred form: each path is a sum of dS times the other token's centred
// features less the sum of dS times its own: the query path of x_i is
// (sum_j dS_ij c_j - (sum_j dS_ij) c_i) / sigma^2. (sum_j dS_ij is 0 in exact
// arithmetic, docs/spec.md, but not from the fp32 y and lse a trainer passes:
// dropping it costs errors of y's rounding times c_i.) Direct form:
// each term carries its own difference, (x_i - x_j) in the key's sum and
// (x_j - x_i) in the query's, so that near-duplicate tokens' terms are as
// small as their differences and nothing is dropped.
#pragma once

#include "gka_backward.h"

namespace gka {

struct FusedBackwardPipeline : BackwardInputs {
    PairTerms terms;                // dS carries 1/sigma^2 (both paths scale by it; another kernel's: its pull)

    // Every pair of a group, by (key in block, query in block, key block, query
    // block, band of the group), innermost first: the order in which the sums
    // below add their terms.
    RDom pairs;
    Halide::RVar key_in_block, query_in_block, key_block, query_block, band_in_group;
    // A group's sums, over its pairs. With block_pairs, the feature sums go a
    // pair of blocks at a time: the pair's sums over the one block's tokens
    // (block_key_sum over the query block, block_query_sum over the key block),
    // added to the tokens' sums once a pair (over key_blocks and query_blocks:
    // the pairs' domain less the other block's tokens, in the same order), so
    // that a schedule can keep a pair's sums in a tile of constant size
    // (BackwardSchedule::block_pairs says where it does); without, each pair's
    // terms go to the tokens' sums.
    bool block_pairs = false;
    Halide::Var in_block{"in_block"}, key_block_of{"key_block_of"}, query_block_of{"query_block_of"},
        band_of_group{"band_of_group"};
    RDom block_queries, block_keys, key_blocks, query_blocks;
    Func block_key_sum{"block_key_sum"};      // (d, in_block, key_block_of, query_block_of, band_of_group, h, b, group)
    Func block_query_sum{"block_query_sum"};  // the same, in_block a query
    // The origin form (bfloat16 features and products): the block sums go by
    // pairs of tokens, two tokens' products a bfloat16 dot product
    // (bf16_product), dS and P rounded to bfloat16 (relative error <= 2^-9 a
    // term, within the bfloat16 contract) times the bfloat16 x and dy. A key's
    // two products of a query, dS x and P dy, are terms of one reduction (the
    // operands' `term`), so that each is a dot product of pairs alone. The
    // scalar sums of dS take the rounded dS, so that each path is
    // sum dS' (x_other - x_own): its rounding scales with the features'
    // differences, not with their distance from the origin.
    bool token_pairs = false;
    Func token_operands{"token_operands"};  // x (term 0), dy (term 1) by token pairs  (pair, d, term, h, p, b)
    Func key_operands{"key_operands"};      // dS (term 0), P (term 1) by query pairs  (pair, j, term, p, h, b)
    Func dscore_by_key_pairs;               // dS by key pairs: key_pairs_bf16         (pair, i, p, h, b)
    Func key_sum{"key_sum"};        // sum_i dS_it x_i / sigma^2 + P_it dy_i    (d, h, t, b, group)
    Func key_stats{"key_stats"};    // {sum_i dS_it / sigma^2, sum_i dsigma_term_it}  (h, t, b, group)
    Func query_sum{"query_sum"};    // sum_j dS_tj x_j / sigma^2                (d, h, t, b, group)
    Func query_stats{"query_stats"};  // sum_j dS_tj / sigma^2 (centred form)   (h, t, b, group)
    // and the groups' totals.
    RDom groups;
    Func pair_sum{"pair_sum"};      // key_sum + query_sum; a chunk's query_sum   (d, h, t, b)
    Func key_pair_sum{"key_pair_sum"};  // a chunk's key_sum (its keys' own tokens)   (d, h, t, b)
    Func dscore_sum{"dscore_sum"};  // (sum_i dS_it + sum_j dS_tj) / sigma^2     (h, t, b)

    RDom tokens;                    // every (t, b, group), for dsigma
    Func dsigma_sum{"dsigma_sum"};  // sum dS_ij (-2 s_ij / sigma_h)             (h)
    Func dx, dx_keys, dsigma, spread;  // the outputs (dx_keys: a chunk's)
};

// The feature sums by pairs of blocks (FusedBackwardPipeline::block_pairs): a
// pair's sums of a block's key against the query block and of a block's query
// against the key block, then the tokens' sums over the pairs' blocks.
inline void define_block_pair_sums(FusedBackwardPipeline &p, const Mask &mask, int key_block, int query_block,
                                   const Expr &blocks, const Expr &bands_per_group, const Expr &groups) {
    const Vars &v = p.v;
    const Var &g = v.group;
    const bool direct = p.form == ScoreForm::direct;
    const Expr bands = mask.key_bands();
    const Expr tile_band = p.band_of_group * groups + g;
    const Expr first_key = mask.token(tile_band, p.key_block_of * key_block);
    const Expr first_query = mask.query_of_window(tile_band, p.query_block_of * query_block);
    const std::vector<Expr> tile = {v.d, p.in_block, p.key_block_of, p.query_block_of, p.band_of_group, v.h, v.b, g};
    p.block_key_sum(tile) = 0.0f;
    p.block_query_sum(tile) = 0.0f;
    if (p.token_pairs) {  // the blocks start at even tokens (Mask::even_queries, even blocks and bands)
        p.block_queries = RDom({{0, 2}, {0, 2}, {0, query_block / 2}}, "block_queries");
        p.block_keys = RDom({{0, 2}, {0, key_block / 2}}, "block_keys");
        const RDom &q = p.block_queries, &k = p.block_keys;
        const Expr key = first_key + p.in_block, query_pair = first_query / 2 + q.z;
        p.block_key_sum(tile) += bf16_product(p.key_operands(q.x, key, q.y, query_pair, v.h, v.b),
                                              p.token_operands(q.x, v.d, q.y, v.h, query_pair, v.b));
        const Expr query = first_query + p.in_block, key_pair = first_key / 2 + k.y;
        p.block_query_sum(tile) += bf16_product(p.dscore_by_key_pairs(k.x, query, key_pair, v.h, v.b),
                                                p.token_operands(k.x, v.d, 0, v.h, key_pair, v.b));
    } else {
        p.block_queries = RDom(0, query_block, "block_queries");
        p.block_keys = RDom(0, key_block, "block_keys");
        {
            const Expr key = first_key + p.in_block, query = first_query + p.block_queries;
            const Expr query_x = p.x(v.d, v.h, query, v.b), key_x = p.key_x(v.d, v.h, key, v.b);
            p.block_key_sum(tile) += p.terms.dscore(key, query, v.h, v.b) * (direct ? query_x - key_x : query_x) +
                                     p.terms.prob(key, query, v.h, v.b) * p.dy(v.d, v.h, query, v.b);
        }
        const Expr key = first_key + p.block_keys, query = first_query + p.in_block;
        const Expr query_x = p.x(v.d, v.h, query, v.b), key_x = p.key_x(v.d, v.h, key, v.b);
        p.block_query_sum(tile) += p.terms.dscore(key, query, v.h, v.b) * (direct ? key_x - query_x : key_x);
    }
    // The tokens' sums, a pair of blocks at a time, over the pairs' blocks.
    const auto blocks_of_pairs = [&](const char *name, int in_block) {
        RDom r({{0, in_block}, {0, mask.band_size / key_block}, {0, blocks}, {0, bands_per_group}}, name);
        r.where(r[3] * groups + g < bands);
        return r;
    };
    p.key_blocks = blocks_of_pairs("key_blocks", key_block);
    {
        RDom &r = p.key_blocks;
        const Expr band = r[3] * groups + g;
        (void)mask.query_block_in_window(r, r[2], query_block, band, true);  // bounds the query blocks
        p.key_sum(v.d, v.h, mask.token(band, r[1] * key_block + r[0]), v.b, g) +=
            p.block_key_sum(v.d, r[0], r[1], r[2], r[3], v.h, v.b, g);
    }
    p.query_blocks = blocks_of_pairs("query_blocks", query_block);
    {
        RDom &r = p.query_blocks;
        const Expr query = mask.query_in_window(r, r[0], r[2], r[3] * groups + g, true);
        p.query_sum(v.d, v.h, query, v.b, g) += p.block_query_sum(v.d, r[0], r[1], r[2], r[3], v.h, v.b, g);
    }
}

// The key bands are mask.band_size keys, walked key_block keys at a time; the
// queries of a band's window go by blocks of query_block (Mask::query_in_window).
// `groups`: of key bands, each summed apart (>= 1); `block_pairs`: the feature
// sums by pairs of blocks (FusedBackwardPipeline). A chunk (gka_forward.h) has
// `keys` of its own, whose paths go to dx_keys, and its queries' to dx; its
// dsigma sums its pairs' terms.
inline void define_backward_fused(FusedBackwardPipeline &p, Func x, Func keys, Func sigma, Func y, Func lse, Func dy,
                                  Expr head_dim, Expr batch, const Mask &call_mask, int key_block, int query_block,
                                  Expr groups, bool block_pairs, ScoreForm form, Func dx, Func dx_keys, Func dsigma,
                                  Func spread, KernelFunction function = KernelFunction::gaussian,
                                  bool bf16_products = false) {
    if (call_mask.band_size % key_block != 0) {
        throw std::invalid_argument("gka backward: the band must be a multiple of key_block");
    }
    const Vars &v = p.v;
    const bool chunk = keys.defined();
    // The origin form's sums by pairs of tokens (define_backward_inputs: bfloat16 products alone).
    p.token_pairs = form == ScoreForm::origin;
    if (p.token_pairs && (key_block % 2 != 0 || query_block % 2 != 0)) {
        throw std::invalid_argument("gka backward: bfloat16 products take even key and query blocks");
    }
    Mask mask = call_mask;
    mask.even_queries = p.token_pairs;
    define_backward_inputs(p, x, keys, y, lse, dy, head_dim, mask, form, function, bf16_products);
    const Expr inv_var = 1.0f / (sigma(v.h) * sigma(v.h));
    p.terms = pair_terms(p, sigma, "", inv_var);
    if (p.token_pairs) {
        Var pair("pair"), term("term"), token_pair("p");
        const Expr token = 2 * token_pair + pair;
        p.token_operands(pair, v.d, term, v.h, token_pair, v.b) =
            Halide::select(term == 0, p.raw_x(v.d, v.h, token, v.b), p.raw_dy(v.d, v.h, token, v.b));
        const Expr dscore = p.terms.dscore(v.j, token, v.h, v.b), prob = p.terms.prob(v.j, token, v.h, v.b);
        p.key_operands(pair, v.j, term, token_pair, v.h, v.b) =
            Halide::cast(Halide::BFloat(16), Halide::select(term == 0, dscore, prob));
        p.dscore_by_key_pairs = key_pairs_bf16(p.terms.dscore, "dscore_by_key_pairs");
    }

    const Expr bands = mask.key_bands();
    const Expr blocks = (mask.query_window_extent() + query_block - 1) / query_block;
    const Expr bands_per_group = (bands + groups - 1) / groups;
    p.pairs = RDom({{0, key_block}, {0, query_block}, {0, mask.band_size / key_block}, {0, blocks},
                    {0, bands_per_group}},
                   "pairs");
    p.key_in_block = p.pairs[0];
    p.query_in_block = p.pairs[1];
    p.key_block = p.pairs[2];
    p.query_block = p.pairs[3];
    p.band_in_group = p.pairs[4];
    const Var &g = v.group;
    const Expr key_band = p.band_in_group * groups + g;  // round-robin: under a causal mask early bands pair most
    p.pairs.where(key_band < bands);
    const Expr key = mask.token(key_band, p.key_block * key_block + p.key_in_block);
    // Clamped: the queries' sums are per token, computed at root (gka_math.h).
    const Expr query = mask.query_in_window(p.pairs, p.query_in_block, p.query_block, key_band, true);

    const Expr dscore = p.terms.dscore(key, query, v.h, v.b);
    const Expr ds = p.token_pairs ? Halide::cast<float>(Halide::cast(Halide::BFloat(16), dscore)) : dscore;
    p.key_stats(v.h, v.t, v.b, g) = {0.0f, 0.0f};
    const Expr dsigma_term = p.terms.dsigma_term(key, query, v.h, v.b);
    p.key_stats(v.h, key, v.b, g) = {p.key_stats(v.h, key, v.b, g)[0] + ds, p.key_stats(v.h, key, v.b, g)[1] + dsigma_term};
    const bool direct = form == ScoreForm::direct;
    p.block_pairs = block_pairs || p.token_pairs;
    p.key_sum(v.d, v.h, v.t, v.b, g) = 0.0f;
    p.query_sum(v.d, v.h, v.t, v.b, g) = 0.0f;
    if (!p.block_pairs) {
        const Expr query_x = p.x(v.d, v.h, query, v.b), key_x = p.key_x(v.d, v.h, key, v.b);
        p.key_sum(v.d, v.h, key, v.b, g) +=
            ds * (direct ? query_x - key_x : query_x) + p.terms.prob(key, query, v.h, v.b) * p.dy(v.d, v.h, query, v.b);
        p.query_sum(v.d, v.h, query, v.b, g) += ds * (direct ? key_x - query_x : key_x);
    } else {
        define_block_pair_sums(p, mask, key_block, query_block, blocks, bands_per_group, groups);
    }

    p.groups = RDom(0, groups, "groups");
    if (chunk) {  // (direct)
        p.pair_sum(v.d, v.h, v.t, v.b) += p.query_sum(v.d, v.h, v.t, v.b, p.groups);
        p.key_pair_sum(v.d, v.h, v.t, v.b) += p.key_sum(v.d, v.h, v.t, v.b, p.groups);
        dx(v.d, v.h, v.t, v.b) = as_element_of(dx, p.pair_sum(v.d, v.h, v.t, v.b));
        dx_keys(v.d, v.h, v.t, v.b) = as_element_of(dx_keys, p.key_pair_sum(v.d, v.h, v.t, v.b));
        p.dx_keys = dx_keys;
    } else if (direct) {
        p.pair_sum(v.d, v.h, v.t, v.b) +=
            p.key_sum(v.d, v.h, v.t, v.b, p.groups) + p.query_sum(v.d, v.h, v.t, v.b, p.groups);
        dx(v.d, v.h, v.t, v.b) = as_element_of(dx, p.pair_sum(v.d, v.h, v.t, v.b));
    } else {
        p.pair_sum(v.d, v.h, v.t, v.b) +=
            p.key_sum(v.d, v.h, v.t, v.b, p.groups) + p.query_sum(v.d, v.h, v.t, v.b, p.groups);
        p.query_stats(v.h, v.t, v.b, g) = 0.0f;
        p.query_stats(v.h, query, v.b, g) += ds;
        p.dscore_sum(v.h, v.t, v.b) +=
            p.key_stats(v.h, v.t, v.b, p.groups)[0] + p.query_stats(v.h, v.t, v.b, p.groups);
        dx(v.d, v.h, v.t, v.b) =
            as_element_of(dx, p.pair_sum(v.d, v.h, v.t, v.b) - p.dscore_sum(v.h, v.t, v.b) * p.x(v.d, v.h, v.t, v.b));
    }

    // dsigma_h = sum dS_ij (-2 s_ij / sigma_h) (PairTerms::dsigma_term), summed in a fixed order.
    p.tokens = RDom(0, mask.key_len, 0, batch, 0, groups, "tokens");
    p.dsigma_sum(v.h) += p.key_stats(v.h, p.tokens.x, p.tokens.y, p.tokens.z)[1];
    dsigma(v.h) = p.dsigma_sum(v.h);
    define_spread(spread, p.terms.scores, mask.seq_len, v);
    p.dx = dx;
    p.dsigma = dsigma;
    p.spread = spread;
}

}  // namespace gka
