// Random-feature GKA, algorithm only (docs/spec.md, "Random-feature GKA"): the
// Gaussian kernel replaced by its estimate from M features a head, in time
// linear in T, for the causal and the full window. Every Func a schedule needs,
// by name.
//
// Feature m of a token is f_m(u) = exp(w_m . u - |u|^2), u = x / sigma, split
// into a factor each side that never overflows:
//   key factor    kappa_tm = exp(w_m . u_t - |u_t|^2 - |w_m|^2 / 4) = exp(-|u_t - w_m / 2|^2) <= 1
//   query factor  rho_tm   = exp(w_m . u_t - |u_t|^2 + |w_m|^2 / 4 - shift_t) <= 1,
// shift_t the largest of the query exponents of token t. rho_im kappa_jm =
// f_m(u_i) f_m(u_j) exp(-shift_i): the shift is a row's, and cancels between
// y's numerator and its row sum; no key factor depends on another token, so no
// state is rescaled, and a query's result depends on no later token, even by
// rounding.
//
// The causal sums go by chunks of `chunk` tokens: a chunk's queries take the
// keys of the chunks before theirs through a state, sum_j kappa_j x_j^T (M x
// (D+1)), a prefix sum over the chunks, and the keys of their own chunk
// through its C x C products under the mask. The full window takes the state
// of every chunk and no products. The feature vectors carry one column past
// the head dim (d = D): a ones column beside x, so that the state's column D is
// sum_j kappa_j, the row sums, and every sum over d is one GEMM.
//
// A call is one segment of a longer sequence: the keys' state of the tokens
// before it comes in (state_in, zero for a sequence's start) and the state
// after its last token goes out, so that the runtime runs a sequence by
// segments in bounded memory, and decode carries the state as its cache. The
// backward takes the queries' state of the tokens after the segment likewise,
// and gives out the one before it.
#pragma once

#include "gka_math.h"

namespace gka {

struct RandomFeatureVars {
    Var d{"d"}, m{"m"}, t{"t"}, h{"h"}, b{"b"}, c{"c"}, j{"j"};
};

// What the forward and backward both compute from x, sigma and W.
struct FeatureFactors {
    Func frequencies;               // W (d, m, h), its edges repeated
    Func inv_sigma{"inv_sigma"};
    Func u{"u"};                    // x / sigma (d, t, h, b); t past T reads the last token
    Func values{"values"};          // x and a ones column (d <= D, t, h, b), 0 past T
    Func projection{"projection"};  // w_m . u_t (m, t, h, b)
    Func norm{"norm"};              // |u_t|^2 (t, h, b)
    Func quarter_norm{"quarter_norm"};  // |w_m|^2 / 4 (m, h)
    Func query_exponent{"query_exponent"};
    Func shift{"shift"};            // max_m query_exponent (t, h, b)
    Func rho{"rho"}, kappa{"kappa"};  // (m, t, h, b); kappa 0 past T
    RDom rd, rm;                    // over d < D, over m
};

// What the forward and backward share: the factors, the keys' state by
// chunks, and the products within a chunk.
struct ChunkedFeatures {
    RandomFeatureVars v;
    Expr head_dim, features, seq_len, chunk_count;
    int chunk = 64;
    Expr causal;
    FeatureFactors f;
    RDom in_chunk;                  // a chunk's tokens (r)
    RDom chunks;                    // the scans over chunks
    Func chunk_state{"chunk_state"};  // sum over a chunk of kappa values^T (m, d, c, h, b)
    Func state{"state"};            // state_in and the chunks before c (m, d, c, h, b); c = chunk_count: all
    Func state_out;                 // the state after the segment (d, m, h, b)
    Func key_product{"key_product"};  // rho_i . kappa_j, j a key's offset in i's chunk (j, t, h, b)
    RDom keys_before;               // a chunk's keys up to a query (j), causal alone
};

// The keys' state after a segment alone.
struct RandomFeatureStatesPipeline : ChunkedFeatures {};

struct RandomFeaturePipeline : ChunkedFeatures {
    Func numerator{"numerator"};    // sum_j rho_i . kappa_j values_j (d <= D, t, h, b)
    Func y, lse;
};

struct RandomFeatureBackwardPipeline : ChunkedFeatures {
    Func fallback{"fallback"};      // rows without an estimate: y = x, lse = -inf (t, h, b)
    Func inv_row_sum{"inv_row_sum"};  // 1 / sum_j rho_i . kappa_j from lse, 0 on fallback rows (t, h, b)
    Func row_dot{"row_dot"};        // dy_t . y_t (t, h, b)
    Func outer{"outer"};            // dy / row sum, and -dy . y / row sum at d = D (d, t, h, b)
    Func chunk_query_state{"chunk_query_state"};                // sum over a chunk of rho outer^T
    Func query_state{"query_state"};  // query_state_in and the chunks from c on (m, d, c, h, b); c = 0: all
    Func query_state_out;           // the queries' state before the segment (d, m, h, b)
    Func pair_gradient{"pair_gradient"};  // outer_i . values_j: dL/d(rho_i . kappa_j) (j, t, h, b)
    RDom queries_after;             // a chunk's queries from a key on, causal alone
    Func query_gradient{"query_gradient"};  // dL/d rho_tm, times rho's row scale (m, t, h, b)
    Func key_gradient{"key_gradient"};      // dL/d kappa_tm (m, t, h, b)
    Func value_gradient{"value_gradient"};  // the value path (d, t, h, b)
    Func exponent_gradient{"exponent_gradient"};  // dL/d(w_m . u_t - |u_t|^2) (m, t, h, b)
    Func exponent_gradient_sum{"exponent_gradient_sum"};  // over m (t, h, b)
    Func frequency_term{"frequency_term"};  // sum_m exponent_gradient w_m (d, t, h, b)
    Func sigma_term{"sigma_term"};  // sum_m exponent_gradient (w_m . u - 2|u|^2) (t, h, b)
    RDom tokens;                    // (t, b) of a head: dW's and dsigma's sums
    Func frequency_gradient{"frequency_gradient"};  // dW's sum (d, m, h)
    Func dx, dfrequencies, dsigma;
};

namespace random_features {

// -inf, the lse of a row without an estimate, made from its bits (compared by
// its bits too: comparisons with infinities may be folded away).
inline Expr minus_infinity() {
    return Halide::reinterpret(Halide::Float(32), Halide::Internal::make_const(Halide::UInt(32), 0xff800000u));
}

// The factors of x (d, h, t, b, widened), sigma (h) and W (d, m, h).
inline void define_factors(FeatureFactors &f, const RandomFeatureVars &v, Func x, Func sigma, Func frequencies,
                           Expr head_dim, Expr features, Expr seq_len) {
    // W read past its features and head dim (whole register tiles of a
    // schedule) repeats its edge; x likewise past the head dim and the tokens.
    // Never summed into a result: every sum over m or d stops at M or D.
    f.frequencies = Halide::BoundaryConditions::repeat_edge(
        frequencies, {{0, head_dim}, {0, features}, {Expr(), Expr()}});
    frequencies = f.frequencies;
    f.rd = RDom(0, head_dim, "rd");
    f.rm = RDom(0, features, "rm");
    f.inv_sigma(v.h) = 1.0f / sigma(v.h);
    const Expr token = Halide::clamp(v.t, 0, seq_len - 1), d = Halide::clamp(v.d, 0, head_dim - 1);
    f.u(v.d, v.t, v.h, v.b) = x(d, v.h, token, v.b) * f.inv_sigma(v.h);
    f.values(v.d, v.t, v.h, v.b) = Halide::select(v.t >= seq_len, 0.0f, v.d < head_dim, x(d, v.h, token, v.b), 1.0f);
    f.projection(v.m, v.t, v.h, v.b) += frequencies(f.rd, v.m, v.h) * f.u(f.rd, v.t, v.h, v.b);
    f.norm(v.t, v.h, v.b) += f.u(f.rd, v.t, v.h, v.b) * f.u(f.rd, v.t, v.h, v.b);
    f.quarter_norm(v.m, v.h) += 0.25f * frequencies(f.rd, v.m, v.h) * frequencies(f.rd, v.m, v.h);
    const Expr exponent = f.projection(v.m, v.t, v.h, v.b) - f.norm(v.t, v.h, v.b);
    f.query_exponent(v.m, v.t, v.h, v.b) = exponent + f.quarter_norm(v.m, v.h);
    f.shift(v.t, v.h, v.b) = Halide::maximum(f.query_exponent(f.rm, v.t, v.h, v.b));
    f.rho(v.m, v.t, v.h, v.b) = exp_nonpositive(f.query_exponent(v.m, v.t, v.h, v.b) - f.shift(v.t, v.h, v.b));
    f.kappa(v.m, v.t, v.h, v.b) =
        Halide::select(v.t < seq_len, exp_nonpositive(exponent - f.quarter_norm(v.m, v.h)), 0.0f);
}

// A prefix sum over the chunks of `per_chunk` (m, d, c, h, b) from `initial`
// (d, m, h, b), the segment's state in: `state`(c) is initial plus the chunks
// before c, c in [0, chunk_count]; reversed, plus the chunks from c on.
inline void define_scan(Func state, Func per_chunk, Func initial, const RandomFeatureVars &v, RDom chunks,
                        Expr chunk_count, bool reversed) {
    state(v.m, v.d, v.c, v.h, v.b) = initial(v.d, v.m, v.h, v.b);
    if (reversed) {
        const Expr c = chunk_count - 1 - chunks;
        state(v.m, v.d, c, v.h, v.b) = state(v.m, v.d, c + 1, v.h, v.b) + per_chunk(v.m, v.d, c, v.h, v.b);
    } else {
        state(v.m, v.d, chunks + 1, v.h, v.b) =
            state(v.m, v.d, chunks, v.h, v.b) + per_chunk(v.m, v.d, chunks, v.h, v.b);
    }
}

// sum over a chunk's tokens of a (m, t) times b (d, t): (m, d, c, h, b).
inline void define_chunk_outer(Func out, Func a, Func b, const RandomFeatureVars &v, RDom in_chunk, int chunk) {
    const Expr t = v.c * chunk + in_chunk;
    out(v.m, v.d, v.c, v.h, v.b) += a(v.m, t, v.h, v.b) * b(v.d, t, v.h, v.b);
}

// The shared part of both passes (ChunkedFeatures), of the widened x and the
// keys' state before the segment (d, m, h, b).
inline void define_chunked(ChunkedFeatures &p, Func xw, Func sigma, Func frequencies, Func state_in, Expr head_dim,
                           Expr features, Expr seq_len, Expr causal, int chunk) {
    const RandomFeatureVars &v = p.v;
    p.head_dim = head_dim, p.features = features, p.seq_len = seq_len, p.chunk = chunk, p.causal = causal;
    p.chunk_count = (seq_len + chunk - 1) / chunk;
    define_factors(p.f, v, xw, sigma, frequencies, head_dim, features, seq_len);
    p.in_chunk = RDom(0, chunk, "in_chunk");
    p.chunks = RDom(0, p.chunk_count, "chunks");
    define_chunk_outer(p.chunk_state, p.f.kappa, p.f.values, v, p.in_chunk, chunk);
    define_scan(p.state, p.chunk_state, state_in, v, p.chunks, p.chunk_count, false);
    // t % chunk, not t - first: bounds inference sees [0, chunk) in it.
    const Expr first = v.t - v.t % chunk;
    p.key_product(v.j, v.t, v.h, v.b) += p.f.rho(p.f.rm, v.t, v.h, v.b) * p.f.kappa(p.f.rm, first + v.j, v.h, v.b);
    p.keys_before = RDom(0, chunk, "keys_before");
    p.keys_before.where(causal != 0 && p.keys_before <= v.t % chunk);
}

}  // namespace random_features

// The keys' state after a segment, state_in plus its tokens' (the runtime's
// pass over segments before a segmented backward).
inline void define_random_feature_states(RandomFeatureStatesPipeline &p, Func x, Func sigma, Func frequencies,
                                         Func state_in, Expr head_dim, Expr features, Expr seq_len, int chunk,
                                         Func state_out) {
    using namespace random_features;
    define_chunked(p, widened_features(x), sigma, frequencies, state_in, head_dim, features, seq_len, Expr(1), chunk);
    const RandomFeatureVars &v = p.v;
    state_out(v.d, v.m, v.h, v.b) = p.state(v.m, v.d, p.chunk_count, v.h, v.b);
    p.state_out = state_out;
}

// x: (d, h, t, b) in the element type; sigma (h); frequencies W (d, m, h),
// float32; the keys' state before the segment (d <= D, m, h, b), float32;
// causal: 1 for the window (-1, 0), 0 for (-1, -1). y (d, h, t, b), lse (t,
// h, b), the state after the segment (d <= D, m, h, b).
inline void define_random_feature_forward(RandomFeaturePipeline &p, Func x, Func sigma, Func frequencies,
                                          Func state_in, Expr head_dim, Expr features, Expr seq_len, Expr causal,
                                          int chunk, Func y, Func lse, Func state_out) {
    using namespace random_features;
    const RandomFeatureVars &v = p.v;
    Func xw = widened_features(x);
    define_chunked(p, xw, sigma, frequencies, state_in, head_dim, features, seq_len, causal, chunk);
    const FeatureFactors &f = p.f;

    // A query's own chunk: its keys up to itself (causal), or none (the full
    // window's state holds every key).
    const Expr c = v.t / chunk, first = v.t - v.t % chunk;
    const Expr state_of = Halide::select(causal != 0, c, p.chunk_count);
    p.numerator(v.d, v.t, v.h, v.b) += f.rho(f.rm, v.t, v.h, v.b) * p.state(f.rm, v.d, state_of, v.h, v.b);
    p.numerator(v.d, v.t, v.h, v.b) +=
        p.key_product(p.keys_before, v.t, v.h, v.b) * f.values(v.d, first + p.keys_before, v.h, v.b);

    // Rows whose every product underflowed have no estimate: y = x, lse = -inf.
    const Expr row_sum = p.numerator(head_dim, v.t, v.h, v.b);
    const Expr estimate = p.numerator(v.d, v.t, v.h, v.b) / row_sum;
    y(v.d, v.h, v.t, v.b) = as_element_of(y, Halide::select(row_sum > 0.0f, estimate, xw(v.d, v.h, v.t, v.b)));
    lse(v.t, v.h, v.b) = Halide::select(
        row_sum > 0.0f, Halide::log(row_sum) + f.shift(v.t, v.h, v.b) - Halide::log(Halide::cast<float>(features)),
        minus_infinity());
    state_out(v.d, v.m, v.h, v.b) = p.state(v.m, v.d, p.chunk_count, v.h, v.b);
    p.y = y;
    p.lse = lse;
    p.state_out = state_out;
}

// The backward of the above: x, sigma, W, the keys' state before the segment,
// the forward's y and lse, dy, the queries' state after the segment (d <= D,
// m, h, b); dx (d, h, t, b), dW (d, m, h), dsigma (h), the queries' state
// before the segment. With G_ij = dy_i . (x_j - y_i) /
// rowsum_i, the pairs' gradient: the value path sum_i P_ij dy_i, and each
// token's exponents' gradient rho_im sum_j G_ij kappa_jm (as a query) plus
// kappa_im sum_j G_ji rho_jm (as a key), carried to x, W and sigma by the
// exponent's derivatives.
inline void define_random_feature_backward(RandomFeatureBackwardPipeline &p, Func x, Func sigma, Func frequencies,
                                           Func state_in, Func y, Func lse, Func dy, Func query_state_in,
                                           Expr head_dim, Expr features, Expr seq_len, Expr batch, Expr causal,
                                           int chunk, Func dx, Func dfrequencies, Func dsigma,
                                           Func query_state_out) {
    using namespace random_features;
    const RandomFeatureVars &v = p.v;
    Func xw = widened_features(x), yw = widened_features(y), dyw = widened_features(dy);
    define_chunked(p, xw, sigma, frequencies, state_in, head_dim, features, seq_len, causal, chunk);
    const FeatureFactors &f = p.f;
    const Expr token = Halide::clamp(v.t, 0, seq_len - 1);

    // The row sum the forward's lse holds, in this pass's shift (lse's own
    // cancels): the same rho, so the same P.
    const Expr stored = lse(token, v.h, v.b);
    p.fallback(v.t, v.h, v.b) =
        Halide::reinterpret<uint32_t>(stored) == Halide::reinterpret<uint32_t>(minus_infinity());
    p.inv_row_sum(v.t, v.h, v.b) = Halide::select(
        v.t >= seq_len || p.fallback(v.t, v.h, v.b), 0.0f,
        Halide::exp(f.shift(v.t, v.h, v.b) - stored - Halide::log(Halide::cast<float>(features))));
    p.row_dot(v.t, v.h, v.b) += dyw(f.rd, v.h, token, v.b) * yw(f.rd, v.h, token, v.b);
    const Expr dy_d = dyw(Halide::clamp(v.d, 0, head_dim - 1), v.h, token, v.b);
    p.outer(v.d, v.t, v.h, v.b) =
        p.inv_row_sum(v.t, v.h, v.b) * Halide::select(v.d < head_dim, dy_d, -p.row_dot(v.t, v.h, v.b));

    define_chunk_outer(p.chunk_query_state, f.rho, p.outer, v, p.in_chunk, chunk);
    define_scan(p.query_state, p.chunk_query_state, query_state_in, v, p.chunks, p.chunk_count, true);

    // Within a chunk (causal alone): j a key's offset in it, t a query. Read
    // only where j is at or before t's offset (keys_before, queries_after).
    const Expr c = v.t / chunk, offset = v.t % chunk, first = v.t - offset;
    RDom rd_all(0, head_dim + 1, "rd_all");
    p.pair_gradient(v.j, v.t, v.h, v.b) += p.outer(rd_all, v.t, v.h, v.b) * f.values(rd_all, first + v.j, v.h, v.b);

    // As a query: the state of the keys before its chunk, then its chunk's keys up to it.
    const Expr key_state = Halide::select(causal != 0, c, p.chunk_count);
    p.query_gradient(v.m, v.t, v.h, v.b) += p.outer(rd_all, v.t, v.h, v.b) * p.state(v.m, rd_all, key_state, v.h, v.b);
    p.query_gradient(v.m, v.t, v.h, v.b) +=
        p.pair_gradient(p.keys_before, v.t, v.h, v.b) * f.kappa(v.m, first + p.keys_before, v.h, v.b);

    // As a key: the queries of the chunks after its own, then its chunk's queries from it on.
    const Expr query_state = Halide::select(causal != 0, c + 1, 0);
    p.queries_after = RDom(0, chunk, "queries_after");
    p.queries_after.where(causal != 0 && p.queries_after >= offset);
    const Expr query = first + p.queries_after;
    p.key_gradient(v.m, v.t, v.h, v.b) +=
        f.values(rd_all, v.t, v.h, v.b) * p.query_state(v.m, rd_all, query_state, v.h, v.b);
    p.key_gradient(v.m, v.t, v.h, v.b) += p.pair_gradient(offset, query, v.h, v.b) * f.rho(v.m, query, v.h, v.b);
    p.value_gradient(v.d, v.t, v.h, v.b) +=
        f.kappa(f.rm, v.t, v.h, v.b) * p.query_state(f.rm, v.d, query_state, v.h, v.b);
    p.value_gradient(v.d, v.t, v.h, v.b) += p.key_product(offset, query, v.h, v.b) * p.outer(v.d, query, v.h, v.b);

    p.exponent_gradient(v.m, v.t, v.h, v.b) = f.rho(v.m, v.t, v.h, v.b) * p.query_gradient(v.m, v.t, v.h, v.b) +
                                              f.kappa(v.m, v.t, v.h, v.b) * p.key_gradient(v.m, v.t, v.h, v.b);
    p.exponent_gradient_sum(v.t, v.h, v.b) += p.exponent_gradient(f.rm, v.t, v.h, v.b);
    p.frequency_term(v.d, v.t, v.h, v.b) += p.exponent_gradient(f.rm, v.t, v.h, v.b) * f.frequencies(v.d, f.rm, v.h);

    // d(w_m . u - |u|^2)/dx = (w_m - 2u) / sigma; /dW_m = u; /dsigma = -(w_m . u - 2|u|^2) / sigma.
    const Expr passed = Halide::select(p.fallback(v.t, v.h, v.b), dyw(v.d, v.h, v.t, v.b), 0.0f);
    const Expr exponents = p.frequency_term(v.d, v.t, v.h, v.b) -
                           2.0f * f.u(v.d, v.t, v.h, v.b) * p.exponent_gradient_sum(v.t, v.h, v.b);
    dx(v.d, v.h, v.t, v.b) =
        as_element_of(dx, exponents * f.inv_sigma(v.h) + p.value_gradient(v.d, v.t, v.h, v.b) + passed);
    p.sigma_term(v.t, v.h, v.b) +=
        p.exponent_gradient(f.rm, v.t, v.h, v.b) * (f.projection(f.rm, v.t, v.h, v.b) - 2.0f * f.norm(v.t, v.h, v.b));
    p.tokens = RDom(0, seq_len, 0, batch, "tokens");
    const Expr t = p.tokens.x, b = p.tokens.y;
    p.frequency_gradient(v.d, v.m, v.h) += p.exponent_gradient(v.m, t, v.h, b) * f.u(v.d, t, v.h, b);
    dfrequencies(v.d, v.m, v.h) = p.frequency_gradient(v.d, v.m, v.h);
    dsigma(v.h) += -f.inv_sigma(v.h) * p.sigma_term(t, v.h, b);
    query_state_out(v.d, v.m, v.h, v.b) = p.query_state(v.m, v.d, 0, v.h, v.b);
    p.dx = dx;
    p.dfrequencies = dfrequencies;
    p.dsigma = dsigma;
    p.query_state_out = query_state_out;
}

}  // namespace gka
