// What libgka's host and device halves share: errors, one-time
// initialization, the rules of windows, chunks, varlen batches and decode.
#pragma once

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string>
#include <utility>

#include "../generators/kernel_function.h"
#include "../generators/score_form.h"
#include "gka/gka.h"

namespace gka {
struct CpuFamily;
}

namespace gka::internal {

// Records `message` as this thread's gka_last_error() and returns `status`.
gka_status fail(gka_status status, std::string message);
void clear_error();
const std::string &last_message();  // also what Halide's error handler recorded
// The status of a Halide pipeline's return code (`where`: the call and the
// variant that ran): GKA_OK, GKA_ERR_OUT_OF_MEMORY, or `other`, with the message.
gka_status from_halide(int code, const std::string &where, gka_status other);
// from_halide for the kernel variant `kernel`, which on success becomes this
// thread's gka_last_kernel(), and its fallback rank this thread's
// last_fallback_rank() (-1: no kernel ran).
gka_status ran(const char *kernel, int code, gka_status other, int fallback_rank = -1);
int last_fallback_rank();
// How far along the score forms a call tries `form` is: the expansion about
// the origin first, then the centred one, the direct form last.
inline int fallback_rank(ScoreForm form) {
    return form == ScoreForm::origin ? 0 : form == ScoreForm::centred ? 1 : 2;
}
// ran for a variant (kernel_variants.h), by its fields.
template <class Variant>
gka_status ran(const Variant *v, int code, gka_status other) {
    return ran(v->name, code, other, fallback_rank(v->form));
}
// Installs Halide's error handler and reads the environment, once.
void initialize_once();
// The CPU family that runs now (forced or the best the host runs), or null
// with the error recorded.
const CpuFamily *cpu_family();
// The shape as messages name it: "shape (batch=.., seq_len=.., heads=.., head_dim=..)".
std::string shape_text(const gka_shape &s);

// The settings the older calls (legacy.cpp) compute with: the calling
// thread's kernel function (gka_set_kernel) and the process's score policy
// (gka_set_score_form).
KernelFunction thread_kernel_function();
gka_score_policy process_score_policy();

// The window as the kernels take it: int32, a span wider than the sequence
// meaning unbounded, as -1 does.
struct KernelWindow {
    int32_t left, right;
};
KernelWindow kernel_window(const gka_window &w, int64_t seq_len);

// Decode's own checks (shape.seq_len: the new tokens; capacity >= 1): the
// window (right span 0), and that the cache holds every key each sequence
// reaches, now and after the new tokens are written.
gka_status check_decode(const gka_shape &shape, int64_t capacity, const gka_window &window,
                        const int64_t *cache_lens);

// Chunks (gka.h, gka_forward_chunk; chunk.cpp): the chunk as messages name it;
// the checks of its placement (starts and key_len >= 0); the keys' shape (the
// queries' with key_len tokens); whether any of its pairs is in the window;
// the kernels' shift (query 0's key position) and spans (a span past every
// pair's offset reaches what an unbounded one does).
std::string chunk_text(const gka_chunk &c);
gka_status check_chunk(const gka_shape &shape, const gka_chunk &c);
gka_shape keys_shape(gka_shape s, const gka_chunk &c);
bool has_pairs(const gka_shape &shape, const gka_chunk &c, const gka_window &w);
struct ChunkWindow {
    int32_t shift, left, right;
};
ChunkWindow chunk_window(const gka_shape &shape, const gka_chunk &c, const gka_window &w);

// Variable-length batches (gka.h, gka_forward_varlen; varlen.cpp): cu_seqlens'
// values against the packed shape (shape.batch sequences, shape.seq_len tokens
// in all), before anything is read through it.
gka_status check_cu_seqlens(const gka_shape &shape, const int64_t *cu_seqlens);

// Runs `one(sequence_shape, first_token)` on each non-empty sequence in order;
// then names, as gka_last_kernel(), the variant of the furthest form any
// sequence ran (it is the one to look for where results differ), the last
// such.
template <class One>
gka_status each_sequence(const gka_shape &shape, const int64_t *cu_seqlens, One one) {
    const char *reported = "";  // the variants' names are static; "" if every sequence is empty
    int reported_rank = -1;
    for (int64_t s = 0; s < shape.batch; s++) {
        const int64_t length = cu_seqlens[s + 1] - cu_seqlens[s];
        if (length == 0) continue;
        if (gka_status status = one(gka_shape{1, length, shape.heads, shape.head_dim}, cu_seqlens[s]);
            status != GKA_OK) {
            return fail(status, "sequence " + std::to_string(s) + ": " + last_message());
        }
        if (*reported == '\0' || last_fallback_rank() >= reported_rank) {
            reported = gka_last_kernel();
            reported_rank = last_fallback_rank();
        }
    }
    return ran(reported, 0, GKA_ERR_INTERNAL);
}

// The families' names, comma-separated ("avx512,avx2,generic"): what
// gka_cpu_families() and gka_cuda_families() return.
template <class Family>
std::string joined_names(const Family *first, const Family *last) {
    std::string names;
    for (const Family *f = first; f != last; f++) names += (names.empty() ? "" : ",") + std::string(f->name);
    return names;
}

}  // namespace gka::internal
