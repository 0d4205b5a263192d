// How a kernel forms |x_i - x_j|^2: one name per form, the same from the C
// ABI (gka_set_score_form) through the CMake variants (SCORES) and the
// generators' `scores` parameter to the kernels' names (_origin, _direct;
// the centred form has no suffix). Plain C++ with no Halide, so that the
// runtime's dispatch table shares it with the generators.
// - centred: the expansion |c_i|^2 + |c_j|^2 - 2 c_i.c_j, a GEMM, over the
//   features centred on their mean per (batch, head);
// - origin: the same expansion over the features as they are (the origin as
//   their centre), the forward's alone: it saves the centring;
// - direct: the differences sum_d (x_id - x_jd)^2, which serve every input.
#pragma once

namespace gka {

enum class ScoreForm { centred, origin, direct };

// The forms' names, in the enum's order.
inline const char *const score_form_names[] = {"centred", "origin", "direct"};

}  // namespace gka
