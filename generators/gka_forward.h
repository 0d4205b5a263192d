// GKA forward, algorithm only (GKA.md, "Forward"): every Func a schedule needs,
// by name. One pass and no running max: s_ii = 0 is the row maximum, so every
// weight exp(s_ij) is in (0, 1] and each row sum is >= 1.
//
// The self pair's weight, exactly 1, is left out of the sums and added at the
// end: y_i = (x_i + sum_{j != i} w_ij x_j) / (1 + sum_{j != i} w_ij). The sums
// then hold terms of like size, so that a near-one-hot row, whose other
// weights are thousands of times below 1, does not lose them one by one
// against it (their errors would grow with the row's length), and a row whose
// only key is itself gives y_i = x_i and lse_i = 0 exactly.
#pragma once

#include "gka_math.h"

namespace gka {

struct ForwardPipeline {
    Vars v;
    Expr head_dim;
    Mask mask;
    ScoreForm form;
    Func x;                             // features, clamped past T (d, h, t, b)
    Centre centre;                      // (d, h, b)
    Func centred{"centred"};            // x - centre                      (d, h, t, b)
    Scores scores;
    RDom keys;                          // the window of a band by blocks (Mask::key_in_window)
    Func weight{"weight"};              // exp(s_ij), 0 where masked and for j = i   (j, i, h, b)
    Func weighted_sum{"weighted_sum"};  // sum_{j != i} exp(s_ij) x_j   (d, offset, band, h, b)
    Func row_sum{"row_sum"};            // sum_{j != i} exp(s_ij)          (offset, band, h, b)
    Func y, lse, spread;                // the outputs
};

// key_block: the keys a block of a band's window (Mask::window).
inline void define_forward(ForwardPipeline &p, Func x, Func sigma, Expr head_dim, const Mask &mask, int key_block,
                           ScoreForm form, Func y, Func lse, Func spread) {
    const Vars &v = p.v;
    p.head_dim = head_dim;
    p.mask = mask;
    p.form = form;
    p.x = clamped_features(x, mask.seq_len);
    p.centre = feature_centre(p.x, mask.seq_len, v);
    p.centred(v.d, v.h, v.t, v.b) = p.x(v.d, v.h, v.t, v.b) - p.centre.mean(v.d, v.h, v.b);
    p.scores = gaussian_scores(form == ScoreForm::Expansion ? p.centred : p.x, p.centred, sigma, head_dim, form, v);
    p.weight(v.j, v.i, v.h, v.b) = Halide::select(mask.allowed(v.i, v.j) && v.i != v.j,
                                                  exp_nonpositive(p.scores.score(v.j, v.i, v.h, v.b)), 0.0f);

    p.keys = mask.window("k", key_block);
    const Expr query = mask.token(v.band, v.offset);
    const Expr key = mask.key_in_window(p.keys, v.band);
    p.weighted_sum(v.d, v.offset, v.band, v.h, v.b) += p.weight(key, query, v.h, v.b) * p.x(v.d, v.h, key, v.b);
    p.row_sum(v.offset, v.band, v.h, v.b) += p.weight(key, query, v.h, v.b);

    const Expr offset = v.t % mask.band_size, band = v.t / mask.band_size;
    const Expr others = p.row_sum(offset, band, v.h, v.b);
    y(v.d, v.h, v.t, v.b) =
        as_element_of(y, (p.x(v.d, v.h, v.t, v.b) + p.weighted_sum(v.d, offset, band, v.h, v.b)) / (1.0f + others));
    lse(v.t, v.h, v.b) = Halide::select(others == 0.0f, 0.0f, Halide::log(1.0f + others));
    define_spread(spread, p.scores, mask.seq_len, v);
    p.y = y;
    p.lse = lse;
    p.spread = spread;
}

}  // namespace gka
