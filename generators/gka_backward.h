// GKA backward, algorithm only (docs/spec.md, "Backward"): every Func a schedule needs,
// by name. x is query, key and value at once, so dx sums three paths:
//   query: dx_i += 1/sigma^2 sum_j dS_ij (x_j - x_i)     summed over the keys of query i
//   key:   dx_j += 1/sigma^2 sum_i dS_ij (x_i - x_j)     summed over the queries of key j
//   value: dx_j += sum_i P_ij dy_i                        summed over the queries of key j
// This file: the inputs and pair terms every backward shares, and the two-pass
// algorithm the CUDA schedule runs: the two directions are two reductions over
// the same pairs, each with its own pair terms, so that no pair term is stored
// and no sum needs atomics: the results are deterministic. The CPU's one-pass
// algorithm is gka_backward_fused.h.
#pragma once

#include "gka_math.h"

namespace gka {

// P, dP and dS of docs/spec.md for every pair (j, i, h, b), dS times a per-head
// scale; P and dS are 0 where masked. Centred form: dprob is dP_ij on centred
// features and dS = P (dP - Dl). Direct form: dprob is dP_ij - Dl_i itself, formed
// as dy_i . (x_j - y_i), whose terms shrink with x_j - y_i: a near-one-hot
// row (y_i near x_i) keeps its tiny dS, and a row whose only key is itself
// (y_i = x_i) has dS = 0 exactly.
//
// dsigma_term is dS_ij's term of dsigma_h, dS_ij (-2 s_ij / sigma_h) without
// dS's scale. The products are grouped so that each factor stays in fp32's
// normal range wherever the term is in it: P dP alone can fall below the
// smallest normal and be flushed to 0 (denormals are), losing a term that
// 1/sigma_h^2 or 1/sigma_h would have made large. P s_ij cannot (a P that is
// not 0 has s_ij - lse_i >= -87.4), nor can P times dP's scaled terms.
// The other kernels' (kernel_terms.h) dS carries its pair's own pull,
// -2 ds/dd2, in place of the Gaussian's per-head 1/sigma^2 (the scale the
// algorithms pass), and its dsigma term is dS_ij ds_ij/dsigma.
struct PairTerms {
    Scores scores;
    Func score;  // s_ij, the self pair's exactly 0 (its dsigma term then is)
    Func prob, dprob, dscore, dsigma_term;
};

// What every backward algorithm reads: the inputs, clamped past T, and Dl.
// Centred form: x and y centred (x - centre, y - centre: GKA is translation
// invariant, and so are the backward's sums over x_j - x_i and x_j - y_i),
// so that no product is of the common offset. Origin form: the centred
// form's sums about the origin (x and y as they are), for bfloat16 features
// with bf16_products alone: the scores and dP then take their dot products
// from the features' and dy's pairs, exact products (as the forward's origin
// form, gka_forward.h). Direct form: as they are.
struct BackwardInputs {
    Vars v;
    Expr head_dim;
    Mask mask;
    ScoreForm form;
    KernelFunction function;
    Centre centre;                  // (d, h, b)
    Func centred{"centred"};        // x - centre, clamped past T                (d, h, t, b)
    Func x, y, dy, lse;             // inputs, clamped past T (x and y centred in the centred form)
    Func key_x;                     // the keys' features: x, or a chunk's keys (direct form)
    Func delta{"delta"};            // Dl_i = dy_i . y_i (the expansions')         (t, h, b)
    Func raw_x, raw_dy, dy_pairs;   // origin form: x and dy as they are, dy by pairs of d (feature_pairs)
};

// `keys`: a chunk's (gka_forward.h; the direct form's alone), or undefined:
// the queries' own tokens.
inline void define_backward_inputs(BackwardInputs &p, Func x, Func keys, Func y, Func lse, Func dy, Expr head_dim,
                                   const Mask &mask, ScoreForm form, KernelFunction function, bool bf16_products) {
    const Vars &v = p.v;
    if (keys.defined() && form != ScoreForm::direct) throw std::invalid_argument("gka backward: chunks take scores=direct");
    if (form == ScoreForm::origin && !(bf16_products && x.type() == Halide::BFloat(16))) {
        throw std::invalid_argument("gka backward: scores=origin takes bfloat16 features and bf16_products");
    }
    p.head_dim = head_dim;
    p.mask = mask;
    p.form = form;
    p.function = function;
    // y is read in reductions over d alone (dP, Dl).
    const Func x_in = clamped_features(x, head_dim, mask.seq_len), y_in = clamped_features(y, Expr(), mask.seq_len);
    p.centre = feature_centre(x_in, mask.seq_len, v);
    p.centred(v.d, v.h, v.t, v.b) = x_in(v.d, v.h, v.t, v.b) - p.centre.mean(v.d, v.h, v.b);
    p.dy = clamped_features(dy, head_dim, mask.seq_len);
    p.lse = Halide::BoundaryConditions::repeat_edge(lse, {{0, mask.seq_len}, {Expr(), Expr()}, {Expr(), Expr()}});
    if (form == ScoreForm::direct) {
        p.x = x_in;
        p.y = y_in;
        p.key_x = keys.defined() ? clamped_features(keys, head_dim, mask.key_len) : p.x;
        return;
    }
    if (form == ScoreForm::origin) {
        p.x = p.key_x = p.centred = x_in;
        p.y = y_in;
        p.raw_x = clamped(x, head_dim, mask.seq_len);
        p.raw_dy = clamped(dy, head_dim, mask.seq_len);
        p.dy_pairs = feature_pairs(p.raw_dy, head_dim, "dy_pairs");
    } else {
        p.x = p.key_x = p.centred;
        p.y = Func("centred_y");
        p.y(v.d, v.h, v.t, v.b) = y_in(v.d, v.h, v.t, v.b) - p.centre.mean(v.d, v.h, v.b);
    }
    RDom rd(0, head_dim, "rd_delta");
    p.delta(v.t, v.h, v.b) += p.dy(rd, v.h, v.t, v.b) * p.y(rd, v.h, v.t, v.b);
}

inline PairTerms pair_terms(const BackwardInputs &p, Func sigma, const char *direction, const Expr &scale) {
    const Vars &v = p.v;
    const std::string prefix = direction;
    PairTerms t{kernel_scores(p.key_x, p.x, p.centred, sigma, p.head_dim, p.form, v, p.function, p.raw_x),
                Func(prefix + "score"),
                Func(prefix + "prob"), Func(prefix + "dprob"), Func(prefix + "dscore"), Func(prefix + "dsigma_term")};
    const RDom &rd = t.scores.rd;
    const Expr s = t.scores.score(v.j, v.i, v.h, v.b);  // the direct form's self pair is 0 as computed
    t.score(v.j, v.i, v.h, v.b) = p.form != ScoreForm::direct ? Halide::select(v.i == v.j, 0.0f, s) : s;
    t.prob(v.j, v.i, v.h, v.b) = Halide::select(
        p.mask.allowed(v.i, v.j), pair_weight(t.scores, v, t.score(v.j, v.i, v.h, v.b), p.lse(v.i, v.h, v.b)), 0.0f);
    Expr dprob_less_delta;  // dP_ij - Dl_i
    if (t.scores.feature_pairs) {  // dP from the key's and dy's pairs (origin form)
        t.dprob(v.j, v.i, v.h, v.b) +=
            bf16_product(t.scores.key_pairs(rd.x, rd.y, v.h, v.j, v.b), p.dy_pairs(rd.x, rd.y, v.h, v.i, v.b));
        dprob_less_delta = t.dprob(v.j, v.i, v.h, v.b) - p.delta(v.i, v.h, v.b);
    } else if (p.form == ScoreForm::direct) {
        const Expr key = t.scores.key_features(rd, v.h, v.j, v.b);
        t.dprob(v.j, v.i, v.h, v.b) += p.dy(rd, v.h, v.i, v.b) * (key - p.y(rd, v.h, v.i, v.b));
        dprob_less_delta = t.dprob(v.j, v.i, v.h, v.b);
    } else {
        t.dprob(v.j, v.i, v.h, v.b) += p.dy(rd, v.h, v.i, v.b) * t.scores.key_features(rd, v.h, v.j, v.b);
        dprob_less_delta = t.dprob(v.j, v.i, v.h, v.b) - p.delta(v.i, v.h, v.b);
    }
    // strict_float: in this order. (Halide lets LLVM reassociate products,
    // and P times 1/sigma^2 alone can be a denormal, flushed to 0.)
    const Expr prob = t.prob(v.j, v.i, v.h, v.b);
    if (p.function != KernelFunction::gaussian) {
        const KernelTerms k = kernel_terms(p.function, t.scores.dot(v.j, v.i, v.h, v.b), sigma(v.h));
        t.dscore(v.j, v.i, v.h, v.b) = Halide::strict_float(prob * (dprob_less_delta * k.pull));
        t.dsigma_term(v.j, v.i, v.h, v.b) = Halide::strict_float(prob * (dprob_less_delta * k.dscore_dsigma));
        return t;
    }
    t.dscore(v.j, v.i, v.h, v.b) = Halide::strict_float(prob * (dprob_less_delta * scale));
    t.dsigma_term(v.j, v.i, v.h, v.b) = Halide::strict_float(
        (prob * t.score(v.j, v.i, v.h, v.b)) * (dprob_less_delta * (-2.0f / sigma(v.h))));
    return t;
}

// Two reductions over the pairs, one per direction.
struct BackwardPipeline : BackwardInputs {
    PairTerms by_query, by_key;     // the pair terms of each direction

    RDom keys;                      // the keys of a query band (Mask::key_in_window)
    Func query_sum{"query_sum"};    // sum_j dS_ij x_j                 (d, offset, band, h, b)
    Func query_stats{"query_stats"};  // {sum_j dS_ij, sum_j dsigma_term_ij}  (offset, band, h, b)

    RDom queries;                   // the queries of a key band (Mask::query_in_window)
    Func key_sum{"key_sum"};        // sum_i dS_ij x_i / sigma^2 + P_ij dy_i   (d, offset, band, h, b)
    Func key_stats{"key_stats"};    // sum_i dS_ij / sigma^2            (offset, band, h, b)

    RDom tokens;                    // every (t, b), for dsigma
    Func dsigma_sum{"dsigma_sum"};  // sum dS_ij (-2 s_ij / sigma_h)             (h)
    Func dx, dx_keys, dsigma, spread;  // the outputs (dx_keys: a chunk's)
};

// key_block, query_block: the tokens a block of each direction's windows (Mask::window).
// The paths' differences as in gka_backward_fused.h: the centred form sums dS times
// the other token's centred features and subtracts (sum dS) times its own at
// the end; the direct form carries each term's own difference (x_j - x_i), so that
// near-duplicate tokens' terms are as small as their differences. A chunk
// (gka_forward.h; direct form) has `keys` of its own: the query direction
// walks them, the key direction walks its key bands, and its keys' paths go
// to dx_keys, its queries' to dx.
inline void define_backward(BackwardPipeline &p, Func x, Func keys, Func sigma, Func y, Func lse, Func dy,
                            Expr head_dim, Expr batch, const Mask &mask, int key_block, int query_block,
                            ScoreForm form, Func dx, Func dx_keys, Func dsigma, Func spread,
                            KernelFunction function = KernelFunction::gaussian) {
    const Vars &v = p.v;
    const bool direct = form == ScoreForm::direct, chunk = keys.defined();
    define_backward_inputs(p, x, keys, y, lse, dy, head_dim, mask, form, function, false);
    p.by_query = pair_terms(p, sigma, "query_", 1.0f);
    // The key direction's dS carries the 1/sigma^2 of its path, once per pair
    // term instead of once per term of its sum.
    const Expr inv_var = 2.0f * p.by_query.scores.inv_two_var(v.h);
    p.by_key = pair_terms(p, sigma, "key_", inv_var);
    // The query path's scale, outside its sum: the other kernels' dS carry theirs.
    const Expr query_scale = function == KernelFunction::gaussian ? inv_var : Expr(1.0f);

    // Query direction: the keys of each query band.
    p.keys = mask.window("k", key_block);
    {
        const Expr query = mask.token(v.band, v.offset);
        const Expr key = mask.key_in_window(p.keys, v.band);
        const PairTerms &t = p.by_query;
        const Expr ds = t.dscore(key, query, v.h, v.b);
        const Expr key_x = t.scores.key_features(v.d, v.h, key, v.b);
        const Expr query_x = t.scores.query_features(v.d, v.h, query, v.b);
        p.query_sum(v.d, v.offset, v.band, v.h, v.b) += ds * (direct ? key_x - query_x : key_x);
        p.query_stats(v.offset, v.band, v.h, v.b) = {0.0f, 0.0f};
        p.query_stats(v.offset, v.band, v.h, v.b) = {p.query_stats(v.offset, v.band, v.h, v.b)[0] + ds,
                                                     p.query_stats(v.offset, v.band, v.h, v.b)[1] +
                                                         t.dsigma_term(key, query, v.h, v.b)};
    }
    // Key direction: the queries of each key band.
    p.queries = mask.query_window("q", query_block);
    {
        const Expr key = mask.token(v.band, v.offset);
        const Expr query = mask.query_in_window(p.queries, v.band);
        const PairTerms &t = p.by_key;
        const Expr ds = t.dscore(key, query, v.h, v.b);
        const Expr query_x = t.scores.query_features(v.d, v.h, query, v.b);
        const Expr key_x = t.scores.key_features(v.d, v.h, key, v.b);
        p.key_sum(v.d, v.offset, v.band, v.h, v.b) += ds * (direct ? query_x - key_x : query_x) +
                                                      t.prob(key, query, v.h, v.b) * p.dy(v.d, v.h, query, v.b);
        p.key_stats(v.offset, v.band, v.h, v.b) += ds;
    }

    const Expr offset = v.t % mask.band_size, band = v.t / mask.band_size;
    const Expr key_sum = p.key_sum(v.d, offset, band, v.h, v.b), query_sum = p.query_sum(v.d, offset, band, v.h, v.b);
    if (chunk) {
        dx(v.d, v.h, v.t, v.b) = as_element_of(dx, query_scale * query_sum);
        dx_keys(v.d, v.h, v.t, v.b) = as_element_of(dx_keys, key_sum);
        p.dx_keys = dx_keys;
    } else if (direct) {
        dx(v.d, v.h, v.t, v.b) = as_element_of(dx, key_sum + query_scale * query_sum);
    } else {
        const Expr query_ds = p.query_stats(offset, band, v.h, v.b)[0], key_ds = p.key_stats(offset, band, v.h, v.b);
        const Expr c = p.x(v.d, v.h, v.t, v.b);
        dx(v.d, v.h, v.t, v.b) = as_element_of(dx, key_sum + inv_var * (query_sum - query_ds * c) - key_ds * c);
    }

    // dsigma_h = sum dS_ij (-2 s_ij / sigma_h), summed in a fixed order.
    p.tokens = RDom(0, mask.seq_len, 0, batch, "tokens");
    p.dsigma_sum(v.h) += p.query_stats(p.tokens.x % mask.band_size, p.tokens.x / mask.band_size, v.h, p.tokens.y)[1];
    dsigma(v.h) = p.dsigma_sum(v.h);
    define_spread(spread, p.by_query.scores, mask.seq_len, v);
    p.dx = dx;
    p.dsigma = dsigma;
    p.spread = spread;
}

}  // namespace gka
