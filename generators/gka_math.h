// The math of Gaussian Kernel Attention shared by the forward and backward
// generators (docs/spec.md), written once so that the two cannot drift apart.
// Algorithm only: nothing here says how or where anything is computed.
#pragma once

#include "Halide.h"
#include "kernel_terms.h"
#include "score_form.h"

namespace gka {

using Halide::Expr;
using Halide::Func;
using Halide::RDom;
using Halide::Var;

// Loop variables shared by every GKA pipeline. In Halide's order x is
// (d, h, t, b). Pair terms are (j, i, h, b): key j first, query i second.
// Tokens are also addressed as (offset, band, h, b), t = band * band_size + offset;
// a group is a set of key bands summed apart (gka_backward_fused.h), a chunk a
// run of cached keys summed apart (gka_decode.h).
struct Vars {
    Var d{"d"}, h{"h"}, t{"t"}, b{"b"}, i{"i"}, j{"j"}, offset{"offset"}, band{"band"}, group{"group"}, chunk{"chunk"};
};

// FlashAttention's window (left, right), -1 meaning unbounded, as the two spans
// of the mask  i - left_span <= j <= i + right_span.
//
// Queries and keys are the same tokens (seq_len of them), except in a chunk
// (gka.h, gka_forward_chunk): seq_len queries against key_len keys, query i at
// key position i + shift. The mask is the same on positions.
//
// Sums run over bands of band_size consecutive tokens. The keys any query of a
// band may attend lie in one window of at most band_size + left_span + right_span
// keys, so a reduction domain of that uniform extent, placed per band, covers
// them. The domain goes by blocks of `block` tokens, and whole blocks past the
// band's last allowed key are skipped (a predicate on the block alone, which
// Halide places outside everything computed per block, tiles included). Pair
// terms that a visited block holds but the mask excludes, tokens past T among
// them, are zero (the weights carry the mask), so every block has the same
// constant extent; everything outside the band's window is never visited.
// (A per-token predicate trimming the last block made its loops variable and
// kept the row sums from vectorizing.) A window of W costs
// O(T * (W + band_size + block)), never O(T^2); causal attention visits the
// blocks at or below the diagonal only.
struct Mask {
    Expr seq_len, left_span, right_span;
    Expr key_len, shift;  // a chunk's keys, and its queries' offset among them
    int band_size = 1;
    bool chunk = false;   // queries and keys apart (the 7-argument constructor)

    // The queries' windows start at an even query, and take one more query
    // (before the first, which the mask excludes, where the window starts at an
    // odd one): the bfloat16 products take queries two at a time
    // (gka_backward_fused.h).
    bool even_queries = false;

    Mask() = default;
    Mask(Expr left, Expr right, Expr seq_len, int band_size) : Mask(left, right, seq_len, seq_len, 0, seq_len, band_size) {
        chunk = false;
    }
    // A chunk's: a span of `span_limit` or more reaches every key from every query.
    Mask(Expr left, Expr right, Expr seq_len, Expr key_len, Expr shift, Expr span_limit, int band_size)
        : seq_len(seq_len),
          left_span(Halide::select(left < 0, span_limit, Halide::min(left, span_limit))),
          right_span(Halide::select(right < 0, span_limit, Halide::min(right, span_limit))),
          key_len(key_len),
          shift(shift),
          band_size(band_size),
          chunk(true) {
    }

    // Query i's position among the keys.
    Expr position(const Expr &query) const { return chunk ? query + shift : query; }

    // Tokens past the end (a window's last block may reach them) are never allowed.
    // One unsigned comparison per key tests both bounds (a key below the first
    // wraps to a large value) against the count of the query's keys, which is
    // 0 for a query past the end or a chunk's query past its keys' window: a
    // query's own test, per row, is not and-ed into every lane (on AVX2 that
    // packed the lanes' masks to 16 bits and back).
    Expr allowed(const Expr &query, const Expr &key) const {
        const Expr at = position(query);
        const Expr first = at - left_span, last = Halide::min(at + right_span, key_len - 1);
        const Expr count = Halide::select(query < seq_len, Halide::max(last - first + 1, 0), 0);
        return Halide::cast<uint32_t>(key - first) < Halide::cast<uint32_t>(count);
    }
    // The keys of a query band's window, the queries of a key band's.
    Expr window_extent() const { return Halide::min(band_size + left_span + right_span, key_len); }
    Expr query_window_extent() const {
        return Halide::min(band_size + left_span + right_span, seq_len) + (even_queries ? 1 : 0);
    }
    Expr bands() const { return (seq_len + band_size - 1) / band_size; }
    Expr key_bands() const { return (key_len + band_size - 1) / band_size; }

    Expr token(const Expr &band, const Expr &offset) const { return band * band_size + offset; }

    // A domain over the window of a band, by blocks: r.x within a block of
    // `block` tokens, r.y the block; r.y * block + r.x in [0, window_extent()).
    RDom window(const char *name, int block) const {
        return RDom(0, block, 0, (window_extent() + block - 1) / block, name);
    }
    // The same over the queries of a key band's window.
    RDom query_window(const char *name, int block) const {
        return RDom(0, block, 0, (query_window_extent() + block - 1) / block, name);
    }
    // The key at r of the window of the queries of `band`; bounds r to the band's last key.
    Expr key_in_window(RDom &r, const Expr &band) const {
        return in_window(r, r.y, r.x.extent(), Halide::max(position(band * band_size) - left_span, 0),
                         position(band * band_size + band_size - 1) + right_span, key_len) +
               r.x;
    }
    // The window of a band by key pairs (the bfloat16 dot products take keys two
    // at a time): r.x the key of a pair (0, 1), r.y the pair in a block of
    // `block` keys, r.z the block. The window starts at an even key, so that a
    // pair is two keys of one stored pair (a window that starts at an odd key
    // takes one more, before it, which the mask excludes).
    RDom pair_window(const char *name, int block) const {
        return RDom({{0, 2}, {0, block / 2}, {0, (window_extent() + 1 + block - 1) / block}}, name);
    }
    // The key pair (keys 2p and 2p + 1) at r of pair_window for the queries of
    // `band`; bounds r to the band's last key.
    Expr key_pair_in_window(RDom &r, const Expr &band) const {
        const Expr first = Halide::max(position(band * band_size) - left_span, 0) / 2 * 2;
        const Expr last_token = Halide::min(position(band * band_size + band_size - 1) + right_span, key_len - 1);
        const Expr block_start = r.z * (2 * r.y.extent());
        r.where(block_start <= last_token - first);
        return (first + block_start) / 2 + r.y;
    }
    // The query at r of the window of the keys of `band`; bounds r to the band's last query.
    Expr query_in_window(RDom &r, const Expr &band) const { return query_in_window(r, r.x, r.y, band); }
    // The same over any two dimensions of r: `in_block` (of extent `block`) and
    // `block`. `clamped`: the block's first query is said to lie in the
    // sequence, as it does wherever the block is visited: bounds inference does
    // not read it from the where clause, and would size what a schedule
    // computes over every query (the queries' sums, the inputs' copies) for a
    // whole window past the sequence's end, about twice the tokens under a
    // causal mask. (unsafe_promise_clamped is lost in fused loops' bounds.)
    // Sums per band (gka_backward.h's) need no clamp, and on CUDA its register
    // made the chunk backward's key sums spill.
    Expr query_in_window(RDom &r, const Halide::RVar &in_block, const Halide::RVar &block, const Expr &band,
                         bool clamped = false) const {
        return query_block_in_window(r, block, in_block.extent(), band, clamped) + in_block;
    }
    // The first query of the block at r.block (of `block_size` queries) of the
    // window of the keys of `band`; bounds the block as query_in_window does.
    Expr query_block_in_window(RDom &r, const Halide::RVar &block, const Expr &block_size, const Expr &band,
                               bool clamped = false) const {
        const Expr last = band * band_size + band_size - 1 + left_span;
        const Expr first = in_window(r, block, block_size, first_query(band), chunk ? last - shift : last, seq_len);
        return clamped ? pair_start(Halide::min(first, seq_len - 1)) : first;
    }
    // The query `index` tokens into the window of the keys of `band`: the first
    // of a tile of a block that query_in_window visits, clamped as its `clamped`.
    Expr query_of_window(const Expr &band, const Expr &index) const {
        return pair_start(Halide::min(first_query(band) + index, seq_len - 1));
    }

private:
    Expr first_query(const Expr &band) const {
        const Expr first = band * band_size - right_span;
        return pair_start(Halide::max(chunk ? first - shift : first, 0));
    }
    // The first query of the pair of `query` under even_queries (the clamps above
    // keep the blocks' starts even, as bounds inference then sees them), else itself.
    Expr pair_start(const Expr &query) const { return even_queries ? query / 2 * 2 : query; }
    // The first token of the block at r.block; the block is skipped whole past the last token.
    Expr in_window(RDom &r, const Halide::RVar &block, const Expr &block_size, const Expr &first, const Expr &last,
                   const Expr &length) const {
        const Expr last_token = Halide::min(last, length - 1), block_start = block * block_size;
        r.where(block_start <= last_token - first);
        return first + block_start;
    }
};

// exp(s) for the scores and log-probabilities of GKA, which are never positive,
// in half the operations of Halide::exp (which also handles overflow and
// infinities, and rounds with floor in two 8-lane halves on AVX-512).
// s = -m ln2 + r, with m = round(-s / ln2) >= 0 and |r| <= ln2 / 2; e^r by a
// degree-5 minimax polynomial; 2^-m by subtracting m from the exponent bits.
// Relative error <= 4.3e-7 with FMA (sampled over [-87, 0]; Halide::exp's is
// ~1.2e-7); without FMA, the rounding of m ln2 makes it 1.2e-6 for s > -20
// and 4.2e-6 near -87. Exactly: exp(0) = 1 (the polynomial's constant term
// is 1), and below log(FLT_MIN) the result is 0, as the accuracy contract
// asks of a weight whose exact value is not a normal float.
constexpr float log_smallest_normal = -87.3365447f;  // log(2^-126)
inline Expr exp_nonpositive(Expr s) {
    const Expr underflows = s < log_smallest_normal;
    s = Halide::clamp(s, log_smallest_normal, 0.0f);
    const Expr m = Halide::cast<int>(0.5f - s * 1.44269504f);  // truncation rounds: the operand is >= 0
    const Expr mf = Halide::cast<float>(m);
    const Expr r = s + mf * 0.693147181f;  // one FMA where the target has one
    Expr p = 0.00829765f;
    for (float c : {0.04191538f, 0.16667575f, 0.49998894f, 0.9999997f, 1.0f}) p = p * r + c;
    const Expr e = Halide::reinterpret(Halide::Float(32), Halide::reinterpret(Halide::Int(32), p) - (m << 23));
    return Halide::select(underflows, 0.0f, e);
}

// The score forms (score_form.h), as the algorithms compute them; the runtime
// picks one per call by docs/spec.md's accuracy contract:
// - centred: c = x - centre, a point of each (head, batch)'s own: the pair
//   loop is a dot product, a GEMM. Its rounding is about
//   eps * sqrt(D) * |c|^2 / sigma^2 in a score, so it serves inputs whose
//   centred features are not far, in units of sigma, from one another (the
//   kernels report max |c|^2: spread).
// - origin (the forward's): c = x. It serves inputs whose features lie near
//   the origin, in units of sigma, and saves the centring: the key features
//   are read where the values are, with no centred copy between (the runtime
//   tries it where the input's sampled tokens allow).
// - direct: exact for near-duplicate tokens however far from the centre;
//   about twice the pair work.

// The centre of each (head, batch)'s features (d, h, b): the mean of up to 16
// tokens spread over the sequence. Any fixed point leaves GKA unchanged (it
// depends on x only through x_i - x_j); one among the features takes a common
// offset out of the expansion's norms, where it would cancel.
struct Centre {
    Func sum{"centre_sum"}, mean{"centre"};
    RDom samples;
};
inline Centre feature_centre(Func x, Expr seq_len, const Vars &v) {
    Centre c;
    const Expr count = Halide::min(seq_len, 16);
    c.samples = RDom(0, count, "samples");
    c.sum(v.d, v.h, v.b) += x(v.d, v.h, c.samples * seq_len / count, v.b);
    c.mean(v.d, v.h, v.b) = c.sum(v.d, v.h, v.b) / Halide::cast<float>(count);
    return c;
}

// The product of two bfloat16 numbers, exact in float32; two of them reduced
// into one float lane are a bfloat16 dot product (vdpbf16ps).
inline Expr bf16_product(const Expr &a, const Expr &b) { return Halide::cast<float>(a) * Halide::cast<float>(b); }

// Features (d, h, t, b) by pairs of tokens (pair, d, h, p, b), tokens 2p and
// 2p + 1 side by side: the operand of bfloat16 dot products over tokens.
inline Func token_pairs(Func features, const char *name) {
    Var pair("pair"), d("d"), h("h"), p("p"), b("b");
    Func pairs(name);
    pairs(pair, d, h, p, b) = features(d, h, 2 * p + pair, b);
    return pairs;
}

// Pair terms f (j, i, h, b) rounded to bfloat16 by pairs of keys (pair, i, p,
// h, b) = f(2p + pair, i, h, b): the other operand of token_pairs' dot products.
inline Func key_pairs_bf16(Func terms, const char *name) {
    Var pair("pair"), i("i"), p("p"), h("h"), b("b");
    Func pairs(name);
    pairs(pair, i, p, h, b) = Halide::cast(Halide::BFloat(16), terms(2 * p + pair, i, h, b));
    return pairs;
}

// Features (d, h, t, b) of bfloat16 by pairs of d (pair, dp, h, t, b),
// d = 2 dp + pair, zero past the head dim (Scores::feature_pairs).
inline Func feature_pairs(Func features, const Expr &head_dim, const char *name) {
    Var pair("pair"), dp("dp"), h("h"), t("t"), b("b");
    const Expr d = 2 * dp + pair;
    Func pairs(name);
    pairs(pair, dp, h, t, b) = Halide::select(d < head_dim, features(d, h, t, b),
                                              Halide::reinterpret(Halide::BFloat(16), Halide::cast<uint16_t>(0)));
    return pairs;
}

// The Funcs of the scores s_ij: the Gaussian's -|x_i - x_j|^2 / (2 sigma_h^2),
// or another kernel's s(|x_i - x_j|^2, sigma_h) (kernel_terms.h), for features
// x (d, h, t, b) and bandwidths sigma (h).
struct Scores {
    KernelFunction function = KernelFunction::gaussian;
    Expr sigma_h;                     // sigma(h), the other kernels' terms read it
    // x seen as keys and as queries: the same features (no projections), named
    // apart so that a schedule can lay out each side for its own access.
    Func key_features{"key_features"}, query_features{"query_features"};  // (d, h, t, b)
    Func sqnorm{"sqnorm"};            // |c_t|^2 of the features about the centre  (t, h, b)
    Func inv_two_var{"inv_two_var"};  // 1 / (2 sigma_h^2)       (h) (the Gaussian's)
    Func dot{"dot"};                  // the pair reduction over d: c_j.c_i (centred, origin),
                                      // |x_j - x_i|^2 (direct)   (j, i, h, b)
    Func score{"score"};              // s_ij <= 0               (j, i, h, b)
    RDom rd;                          // over the head dimension: d, or (pair, dp) by feature pairs
    // The origin form from bfloat16 features (kernel_scores' `bf16_features`):
    // dot goes by pairs of d, d = 2 dp + pair, each product exact and summed in
    // float (as bfloat16 dot products do, two features a step). Pairs are zero
    // past the head dim, so an odd head dim's last pair adds its one product
    // (the schedules copy both sides, so the test costs the copies alone).
    bool feature_pairs = false;
    Func key_pairs, query_pairs;  // (pair, dp, h, t, b): feature_pairs
};

// `features`: what the pair reduction reads: centred (centred form) or as they
// are (origin, direct). `centred`: the features about the form's centre (the
// origin's: x), whose norms make the expansion and the spread. The
// expansion's self pair rounds a hair off 0: each pass says what it makes of
// that pair (the forward leaves it out of its sums, the backward's PairTerms
// score it 0).
// `keys` and `queries` (d, h, t, b): the features the pairs read on each side,
// where they are two tensors (decode: a cache and the new tokens).
// The kernels other than the Gaussian take the direct form alone: their
// scores are not affine in d2, so the expansion's rounding, an absolute error
// in d2, is not a bounded one in their scores near d2 = 0 (the Laplace's
// slope is infinite there) and no spread test bounds it alike.
// bf16_features (the origin form's, where keys and queries are one tensor of
// bfloat16 features): dot by feature pairs (Scores::feature_pairs), the float
// kernel's own arithmetic up to the order of its sums.
inline Scores kernel_scores(Func keys, Func queries, Func centred, Func sigma, Expr head_dim, ScoreForm form,
                            const Vars &v, KernelFunction function = KernelFunction::gaussian,
                            Func bf16_features = Func()) {
    if (function != KernelFunction::gaussian && form != ScoreForm::direct) {
        throw std::invalid_argument(std::string("gka: the ") + kernel_function_names[int(function)] +
                                    " kernel takes scores=direct");
    }
    Scores s;
    s.function = function;
    s.sigma_h = sigma(v.h);
    s.rd = RDom(0, head_dim, "rd");
    const RDom &rd = s.rd;
    s.key_features(v.d, v.h, v.t, v.b) = keys(v.d, v.h, v.t, v.b);
    s.query_features(v.d, v.h, v.t, v.b) = queries(v.d, v.h, v.t, v.b);
    s.sqnorm(v.t, v.h, v.b) += centred(rd, v.h, v.t, v.b) * centred(rd, v.h, v.t, v.b);
    s.inv_two_var(v.h) = 0.5f / (sigma(v.h) * sigma(v.h));
    if (form == ScoreForm::direct) {
        const Expr diff = s.key_features(rd, v.h, v.j, v.b) - s.query_features(rd, v.h, v.i, v.b);
        s.dot(v.j, v.i, v.h, v.b) += diff * diff;
        s.score(v.j, v.i, v.h, v.b) =
            function == KernelFunction::gaussian
                ? -s.dot(v.j, v.i, v.h, v.b) * s.inv_two_var(v.h)
                : kernel_terms(function, s.dot(v.j, v.i, v.h, v.b), s.sigma_h).score;
        return s;
    }
    if (bf16_features.defined()) {
        if (form != ScoreForm::origin) throw std::invalid_argument("gka: bfloat16 feature pairs take scores=origin");
        s.feature_pairs = true;
        s.key_pairs = feature_pairs(bf16_features, head_dim, "key_pairs");
        s.query_pairs = feature_pairs(bf16_features, head_dim, "query_pairs");
        s.rd = RDom({{0, 2}, {0, (head_dim + 1) / 2}}, "rd");
        s.dot(v.j, v.i, v.h, v.b) +=
            bf16_product(s.key_pairs(s.rd.x, s.rd.y, v.h, v.j, v.b), s.query_pairs(s.rd.x, s.rd.y, v.h, v.i, v.b));
    } else {
        s.dot(v.j, v.i, v.h, v.b) += s.key_features(rd, v.h, v.j, v.b) * s.query_features(rd, v.h, v.i, v.b);
    }
    // |c_i - c_j|^2 = |c_i|^2 + |c_j|^2 - 2 c_i.c_j can round a hair below zero;
    // s_ij <= 0 is what keeps every exp(s_ij) in (0, 1].
    Expr sq_dist = s.sqnorm(v.i, v.h, v.b) + s.sqnorm(v.j, v.h, v.b) - 2.0f * s.dot(v.j, v.i, v.h, v.b);
    s.score(v.j, v.i, v.h, v.b) = Halide::min(-sq_dist * s.inv_two_var(v.h), 0.0f);
    return s;
}

// exp(score - offset) of the pair (v.j, v.i, v.h, v.b), for `score` (<= 0: the
// pair's s_ij, or a pass's copy of it) and an offset >= 0 (the backward's lse_i;
// undefined: 0): where the kernel has an exact weight of its own (kernel_terms.h),
// that weight times exp(-offset), else the exponential of the difference.
inline Expr pair_weight(const Scores &s, const Vars &v, const Expr &score, const Expr &offset = Expr()) {
    if (s.function != KernelFunction::gaussian) {
        const Expr weight = kernel_terms(s.function, s.dot(v.j, v.i, v.h, v.b), s.sigma_h).weight;
        if (weight.defined()) return offset.defined() ? weight * exp_nonpositive(-offset) : weight;
    }
    return exp_nonpositive(offset.defined() ? score - offset : score);
}

// max_t |c_t|^2 of each (head, batch) (h, b): the runtime's test of whether
// the expansion serves these inputs (gka.cpp).
inline void define_spread(Func spread, const Scores &s, Expr seq_len, const Vars &v) {
    RDom t(0, seq_len, "spread_tokens");
    spread(v.h, v.b) = 0.0f;
    spread(v.h, v.b) = Halide::max(spread(v.h, v.b), s.sqnorm(t, v.h, v.b));
}

// bfloat16 to float and back by integer operations, as Halide's emulation on
// CPUs does it (exact widening; rounding to nearest even): Halide 21's PTX
// backend asserts on a cast between the two types, and this way every target
// gives the same bits.
inline Expr bfloat16_to_float(const Expr &value) {
    return Halide::reinterpret(Halide::Float(32), Halide::cast<uint32_t>(Halide::reinterpret<uint16_t>(value)) << 16);
}
inline Expr float_to_bfloat16(const Expr &value) {
    const Expr bits = Halide::reinterpret<uint32_t>(Halide::strict_float(value));
    const Expr rounded = (bits + (0x7fff + ((bits >> 16) & 1))) >> 16;
    return Halide::reinterpret(Halide::BFloat(16), Halide::cast<uint16_t>(rounded));
}

// Features read past the last token see the last token, and past the head dim
// (where one is given) the last feature. Those values are never summed into a
// result (the mask excludes the tokens, and every reduction over d stops at the
// head dim), but tiles may then run past T unguarded, and a schedule may
// compute a sum's vectors of d past the head dim to keep a register tile whole.
// Features read in reductions over d alone need no bound in d (it would cost a
// clamp per read where the head dim is known at run time alone).
inline Func clamped(Func x, Expr head_dim, Expr seq_len) {
    const Halide::Range d = head_dim.defined() ? Halide::Range(0, head_dim) : Halide::Range(Expr(), Expr());
    return Halide::BoundaryConditions::repeat_edge(x, {d, {Expr(), Expr()}, {0, seq_len}, {Expr(), Expr()}});
}
// Features of a narrower type (bfloat16) are widened to float, exactly: every
// score, weight and sum is float whatever the tensors' element type.
inline Func widened_features(Func x) {
    if (x.type() == Halide::Float(32)) return x;
    Func widened(x.name() + "_f32");
    widened(x.args()) = bfloat16_to_float(x(x.args()));
    return widened;
}
inline Func clamped_features(Func x, Expr head_dim, Expr seq_len) {
    return widened_features(clamped(x, head_dim, seq_len));
}

// An output's value in its element type (float, or bfloat16 rounded to nearest even).
inline Expr as_element_of(const Func &output, const Expr &value) {
    return output.type() == Halide::Float(32) ? value : float_to_bfloat16(value);
}

}  // namespace gka
