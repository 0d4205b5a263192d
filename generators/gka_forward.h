// GKA forward, algorithm only (GKA.md, "Forward"): every Func a schedule needs,
// by name. One pass and no running max: s_ii = 0 is the row maximum, so every
// weight exp(s_ij) is in (0, 1] and each row sum is >= 1.
#pragma once

#include "gka_math.h"

namespace gka {

struct ForwardPipeline {
    Vars v;
    Expr head_dim;
    Mask mask;
    Func x;                             // features, clamped past T (d, h, t, b)
    Scores scores;
    RDom keys;                          // the window of a band by blocks (Mask::key_in_window)
    Func weight{"weight"};              // exp(s_ij), 0 where masked       (j, i, h, b)
    Func weighted_sum{"weighted_sum"};  // sum_j exp(s_ij) x_j   (d, offset, band, h, b)
    Func row_sum{"row_sum"};            // sum_j exp(s_ij)          (offset, band, h, b)
    Func y, lse;                        // the outputs
};

// key_block: the keys a block of a band's window (Mask::window).
inline void define_forward(ForwardPipeline &p, Func x, Func sigma, Expr head_dim, const Mask &mask, int key_block,
                           Func y, Func lse) {
    const Vars &v = p.v;
    p.head_dim = head_dim;
    p.mask = mask;
    p.x = clamped_features(x, mask.seq_len);
    p.scores = gaussian_scores(p.x, sigma, head_dim, v);
    p.weight(v.j, v.i, v.h, v.b) =
        Halide::select(mask.allowed(v.i, v.j), exp_nonpositive(p.scores.score(v.j, v.i, v.h, v.b)), 0.0f);

    p.keys = mask.window("k", key_block);
    const Expr query = mask.token(v.band, v.offset);
    const Expr key = mask.key_in_window(p.keys, v.band);
    p.weighted_sum(v.d, v.offset, v.band, v.h, v.b) += p.weight(key, query, v.h, v.b) * p.x(v.d, v.h, key, v.b);
    p.row_sum(v.offset, v.band, v.h, v.b) += p.weight(key, query, v.h, v.b);

    const Expr offset = v.t % mask.band_size, band = v.t / mask.band_size;
    y(v.d, v.h, v.t, v.b) = p.weighted_sum(v.d, offset, band, v.h, v.b) / p.row_sum(offset, band, v.h, v.b);
    lse(v.t, v.h, v.b) = Halide::log(p.row_sum(offset, band, v.h, v.b));
    p.y = y;
    p.lse = lse;
}

}  // namespace gka
