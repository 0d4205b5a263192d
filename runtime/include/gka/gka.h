/* libgka: Gaussian Kernel Attention kernels generated with Halide.
 *
 * Layouts are FlashAttention's (see docs/spec.md): x, y, dy, dx are [B][T][H][D]
 * float32 (or bfloat16), C-contiguous; lse is [B][H][T]; sigma and dsigma are
 * [H]. All pointers are host memory, except on a CUDA device (GKA_CUDA, the
 * *_cuda calls: device memory). The window is FlashAttention's (left, right),
 * -1 meaning unbounded: (-1,-1) full, (-1,0) causal, (W-1,0) causal sliding
 * window.
 *
 * Tensors of up to 2^31 - 1 elements (B*T*H*D) are supported; larger shapes
 * are GKA_ERR_UNSUPPORTED. A call is described by a gka_call (below) and run by
 * gka_run_forward, gka_run_backward or gka_run_decode; a dimension may be 0
 * there, and the call then writes the exact results without a kernel. The
 * older calls (gka_forward and the others) refuse a zero dimension. The CPU
 * passes allocate up to a few tensors' worth of memory of their own
 * (docs/c-api.md, "Sizes").
 *
 * Every call validates its arguments before touching any output. On failure it
 * returns a status other than GKA_OK and gka_last_error() says why. Calls are
 * thread-safe; the same inputs give bitwise-identical outputs.
 *
 * The CPU kernels flush denormals to zero (inputs below 2^-126 read as 0,
 * results below it written as 0): sharp kernels make them in the sums, where
 * x86 computes them 20-50x slower, and they lie far below what GKA's float
 * sums resolve. They run rounding to nearest with exceptions masked, whatever
 * the caller's floating-point mode, which is restored on return. */
#ifndef GKA_GKA_H
#define GKA_GKA_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(__GNUC__)
#define GKA_API __attribute__((visibility("default")))
#else
#define GKA_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef enum gka_status {
    GKA_OK = 0,
    GKA_ERR_INVALID_ARGUMENT = 1,
    GKA_ERR_UNSUPPORTED = 2,
    GKA_ERR_OUT_OF_MEMORY = 3,
    GKA_ERR_DEVICE = 4,
    GKA_ERR_INTERNAL = 5
} gka_status;

typedef struct gka_shape {
    int64_t batch, seq_len, heads, head_dim;
} gka_shape;

typedef struct gka_window {
    int64_t left, right;
} gka_window;

/* A chunk's placement (gka_forward_chunk): its queries at positions
 * query_start.., its key_len keys at key_start... */
typedef struct gka_chunk {
    int64_t query_start, key_start, key_len;
} gka_chunk;

/* bfloat16 features: the upper 16 bits of a float32, as torch.bfloat16 stores
 * them (gka_forward_bf16 below says how the kernels compute with them). */
typedef uint16_t gka_bf16;

/* ---- The call description: what a call computes, in one struct ----
 * Three compute calls take it: gka_run_forward, gka_run_backward and
 * gka_run_decode, whatever the dtype, device, kernel function or batch layout
 * (docs/c-api.md, "Calls"). Everything that decides a call's results is a field
 * of it: no thread-local or process-wide setting changes what these calls
 * compute (gka_set_kernel and gka_set_score_form are the older calls'; the CPU
 * family and the thread count stay process settings: they change the speed,
 * not the results beyond float rounding).
 *
 * Start from gka_call_init(): it sets `size` and every default (a zero field is
 * its default, except the window: causal). `size` lets the struct grow: fields
 * added later come after today's, a caller compiled against an older gka.h
 * gets their defaults, and a library older than the caller's gka.h refuses a
 * call that sets fields it does not know (GKA_ERR_UNSUPPORTED), reading the
 * rest.
 *
 * The shape's dimensions may be 0: such a call runs no kernel and writes the
 * exact results (y and dx have no elements; dsigma is 0; where only D is 0
 * every score is 0, so lse_i = log of the number of keys in row i's window,
 * -inf where it has none), after the same checks as any call. A tensor with no
 * elements may be NULL. The layouts are the older calls' (below), and so are
 * the rules of each batch layout: at most one of cu_seqlens (gka_forward_varlen),
 * chunk (gka_forward_chunk) and the decode fields (gka_decode) is set, and a
 * call refuses the fields of a layout it does not take. */
typedef enum gka_dtype { GKA_FLOAT32 = 0, GKA_BFLOAT16 = 1 } gka_dtype;
typedef enum gka_device { GKA_CPU = 0, GKA_CUDA = 1 } gka_device;
typedef enum gka_kernel_function { GKA_GAUSSIAN = 0, GKA_LAPLACE = 1, GKA_CAUCHY = 2 } gka_kernel_function;
typedef enum gka_score_policy {
    GKA_SCORES_AUTO = 0,
    GKA_SCORES_ORIGIN = 1,
    GKA_SCORES_CENTRED = 2,
    GKA_SCORES_DIRECT = 3
} gka_score_policy;

typedef struct gka_call {
    size_t size;               /* sizeof(gka_call) as the caller compiled it */
    gka_shape shape;           /* varlen: (sequences, total tokens, H, D); decode: seq_len new tokens */
    gka_window window;
    gka_dtype dtype;           /* of x, y, dy, dx, keys, dx_keys, cache; sigma, lse, dsigma are float32 */
    gka_kernel_function kernel;
    gka_score_policy scores;   /* the first score form tried: gka_set_score_form's meaning */
    gka_device device;         /* GKA_CUDA: every tensor is device memory; cu_seqlens, chunk, cache_lens host */
    void *stream;              /* GKA_CUDA: the CUstream the work is enqueued on (NULL: the legacy default) */
    const int64_t *cu_seqlens; /* varlen: shape.batch + 1 sequence bounds (gka_forward_varlen) */
    const gka_chunk *chunk;    /* a chunk's placement (gka_forward_chunk): float32 alone */
    int64_t cache_capacity;    /* decode: the cache's slots per sequence (gka_decode) */
    const int64_t *cache_lens; /* decode: shape.batch tokens already cached */
    const void *x;             /* the features (queries for a chunk; new tokens for decode) */
    const float *sigma;        /* [H] */
    void *y;                   /* written by the forward and decode, read by the backward */
    float *lse;                /* likewise */
    const void *dy;            /* backward */
    void *dx;                  /* backward */
    float *dsigma;             /* backward */
    const void *keys;          /* chunk: the keys' features, [B][key_len][H][D] */
    void *dx_keys;             /* chunk backward */
    void *cache;               /* decode: [B][cache_capacity][H][D], the new tokens written into it */
    /* Random-feature GKA (docs/spec.md, "Random-feature GKA"): features = M > 0
     * replaces the Gaussian by its estimate from M features a head, of the
     * frequencies W, in time linear in T. The causal and the full window,
     * float32 features on the CPU, the Gaussian; gka_run_forward and
     * gka_run_backward, on equal lengths or a varlen batch (cu_seqlens), and
     * gka_run_decode (no chunk: GKA_ERR_UNSUPPORTED). Its decode's cache is
     * the keys' state, float32 [B][H][M][D + 1] (zeros for empty sequences):
     * the call reads it, and leaves the state after the new tokens there, in
     * O(M D) a token whatever the length; cache_capacity 0, cache_lens NULL,
     * the causal window. 0: exact GKA. */
    int64_t features;
    const float *frequencies;  /* W [H][M][D], each finite */
    float *dfrequencies;       /* backward: dL/dW [H][M][D], overwritten */
} gka_call;

static inline gka_call gka_call_init(void) {
    gka_call c;
    memset(&c, 0, sizeof c);
    c.size = sizeof c;
    c.window.left = -1;
    c.window.right = 0;
    return c;
}

/* y and lse of x (gka_forward's; cu_seqlens or chunk as gka_forward_varlen's and
 * gka_forward_chunk's). */
GKA_API gka_status gka_run_forward(const gka_call *call);
/* dx and dsigma (dx_keys for a chunk) from x, sigma, y, lse and dy (gka_backward's). */
GKA_API gka_status gka_run_backward(const gka_call *call);
/* y and lse of the new tokens x against the cache, then x into the cache (gka_decode's). */
GKA_API gka_status gka_run_decode(const gka_call *call);
/* 1 if some (query, key) pair of the chunk is in the window, 0 if none: a call
 * on such a chunk runs no kernel (its results are y = 0, lse = -inf, gradients
 * 0), and a caller that merges chunks may skip it. */
GKA_API int gka_chunk_has_pairs(gka_shape shape, gka_chunk chunk, gka_window window);

/* ---- The older calls ----
 * Each is a thin wrapper over the calls above, kept for existing callers: it
 * refuses a zero dimension (GKA_ERR_INVALID_ARGUMENT) and computes the kernel
 * function of the calling thread (gka_set_kernel) with the score policy of the
 * process (gka_set_score_form). */

/* y = softmax-normalized Gaussian-kernel average of x; lse its log row sums. */
GKA_API gka_status gka_forward(gka_shape shape, gka_window window, const float *x, const float *sigma, float *y,
                       float *lse);

/* Gradients of L = sum(dy . y) with respect to x and sigma, from the forward's
 * y and lse. dx and dsigma are overwritten, not accumulated. On the CPU its
 * tasks are the (batch, head) pairs, times groups of key bands summed apart
 * where batch * heads is below the schedule's min_tasks (2 unless a row of
 * schedules/tuned.tsv sets it): fewer tasks than threads leave threads idle.
 * The groups follow the shape, never the thread count, so results do not. */
GKA_API gka_status gka_backward(gka_shape shape, gka_window window, const float *x, const float *sigma, const float *y,
                        const float *lse, const float *dy, float *dx, float *dsigma);

/* bfloat16 features. x, y, dy and dx hold bfloat16 values (gka_bf16: the
 * upper 16 bits of a float32, as torch.bfloat16 stores them), in the layouts
 * above; sigma, lse and dsigma stay float32. Validation, errors, dispatch and
 * determinism are the float32 calls'. The kernels widen the inputs (exactly)
 * and compute every score, weight and sum in float32, then round y and dx to
 * nearest even: the float32 results of the same bfloat16 inputs, rounded once
 * (docs/accuracy.md). One exception: on a family with bfloat16 dot products
 * ("zen4"), the forward rounds the weights of y's sum to bfloat16 and
 * multiplies them by the features in bfloat16 (each product exact, summed in
 * float32), as FlashAttention does; lse is unchanged. gka_last_kernel() names
 * them with "_bf16". */
/* Conversions as the kernels (and torch) round: to nearest even; NaN stays NaN. */
static inline gka_bf16 gka_bf16_from_float(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (gka_bf16)((u >> 16) | 0x40);
    return (gka_bf16)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
static inline float gka_float_from_bf16(gka_bf16 b) {
    const uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
GKA_API gka_status gka_forward_bf16(gka_shape shape, gka_window window, const gka_bf16 *x, const float *sigma,
                                    gka_bf16 *y, float *lse);
GKA_API gka_status gka_backward_bf16(gka_shape shape, gka_window window, const gka_bf16 *x, const float *sigma,
                                     const gka_bf16 *y, const float *lse, const gka_bf16 *dy, gka_bf16 *dx,
                                     float *dsigma);

/* Decode: y and lse of a few new tokens of each sequence against a cache of
 * the features before them. GKA's keys and values are the features, so the
 * cache holds x alone: [B][capacity][H][D], position p of sequence b in slot
 * p % capacity. cache_lens[b] (FlashAttention's cache_seqlens) is the number
 * of tokens of sequence b before this call; sequences may differ. x holds the
 * new tokens' features, [B][shape.seq_len][H][D], at positions cache_lens[b]
 * onwards; y is laid out as x, lse [B][H][shape.seq_len]. The window's right
 * span must be 0 (the new tokens' future is not there). Causal (-1, 0): each
 * sequence must fit, cache_lens[b] + seq_len <= capacity. A sliding window
 * (W-1, 0): the cache is a ring holding the last W-1 tokens, which needs
 * capacity >= W-1 and then serves a sequence of any length; a smaller
 * capacity is refused at once, whatever the lengths, and the error says the
 * capacity needed.
 * After computing y and lse the call writes the new tokens' features into
 * their slots (the last `capacity` of them); it does not change cache_lens:
 * the caller adds seq_len. x, y and lse must not overlap the cache.
 * The kernels split each cache into chunks of keys, summed apart and then in
 * order: results do not depend on the thread count. They are for few new
 * tokens (their pairs with one another are a small loop); to prefill a long
 * prompt, run gka_forward on it and copy its x into the cache. */
GKA_API gka_status gka_decode(gka_shape shape, int64_t capacity, gka_window window, const float *x,
                              const float *sigma, const int64_t *cache_lens, float *cache, float *y, float *lse);
GKA_API gka_status gka_decode_bf16(gka_shape shape, int64_t capacity, gka_window window, const gka_bf16 *x,
                                   const float *sigma, const int64_t *cache_lens, gka_bf16 *cache, gka_bf16 *y,
                                   float *lse);

/* Variable-length batches (FlashAttention's varlen): shape.batch sequences
 * packed one after another, shape.seq_len tokens in all. x, y, dy and dx are
 * [total][H][D], sequence s at tokens cu_seqlens[s] .. cu_seqlens[s+1] - 1;
 * cu_seqlens has shape.batch + 1 int64 entries: 0 first, non-decreasing (a
 * sequence may be empty), the total last; anything else is an error before
 * anything is written; if every sequence is empty (a total of 0) the calls write
 * nothing but dsigma's zeros. lse is [H][total], FlashAttention's varlen layout. Each
 * sequence attends within itself under the window, as a call of its own would
 * (and at its cost: nothing is padded); dsigma sums the sequences' in order.
 * gka_last_kernel() names the variant of the furthest score form any
 * sequence ran (direct, then the centred expansion, then the expansion about
 * the origin: gka_set_score_form), the last such. The bf16 calls take
 * bfloat16 features. */
GKA_API gka_status gka_forward_varlen(gka_shape shape, const int64_t *cu_seqlens, gka_window window, const float *x,
                                      const float *sigma, float *y, float *lse);
GKA_API gka_status gka_backward_varlen(gka_shape shape, const int64_t *cu_seqlens, gka_window window, const float *x,
                                       const float *sigma, const float *y, const float *lse, const float *dy,
                                       float *dx, float *dsigma);
GKA_API gka_status gka_forward_varlen_bf16(gka_shape shape, const int64_t *cu_seqlens, gka_window window,
                                           const gka_bf16 *x, const float *sigma, gka_bf16 *y, float *lse);
GKA_API gka_status gka_backward_varlen_bf16(gka_shape shape, const int64_t *cu_seqlens, gka_window window,
                                            const gka_bf16 *x, const float *sigma, const gka_bf16 *y,
                                            const float *lse, const gka_bf16 *dy, gka_bf16 *dx, float *dsigma);

/* Chunked attention: a block of shape.seq_len queries at positions
 * query_start.. against a block of key_len keys at key_start.., under the
 * window on positions: the building block of sequence (context) parallelism.
 * x holds the queries' features, [B][shape.seq_len][H][D], keys the keys',
 * [B][key_len][H][D] (the same tensor where the blocks are the same tokens).
 * The forward gives the chunk's partial results over its pairs alone, the
 * self pair among them where a query's position is among the keys: y [B][Tq][H][D]
 * normalized within the chunk and lse [B][H][Tq]. They merge exactly:
 * lse = log sum_c exp(lse_c), y = sum_c exp(lse_c - lse) y_c; a row with no
 * pair in the chunk gives lse_c = -inf and y_c = 0, and merges as nothing.
 * The backward takes the merged y and lse of these queries (over all their
 * chunks) and dy, and gives this chunk's contributions: dx (the queries'
 * path), dx_keys [B][key_len][H][D] (the keys' and values' paths) and dsigma,
 * overwritten; a token's gradient is the sum of its dx over the chunks where
 * it is a query and of its dx_keys where it is a key, and dsigma the sum over
 * every chunk. The outputs must not overlap one another or the inputs (on a
 * diagonal chunk x and keys may be one tensor; dx and dx_keys are two).
 * Positions and lengths must keep below 2^28. A chunk with no
 * pair in the window runs no kernel (y = 0, lse = -inf, gradients 0); the
 * kernels compute direct differences (as gka_set_score_form("direct")) in
 * float32. gka_last_kernel() names them ("gka_forward_chunk_..."). */
GKA_API gka_status gka_forward_chunk(gka_shape shape, gka_chunk chunk, gka_window window, const float *x,
                                     const float *keys, const float *sigma, float *y, float *lse);
GKA_API gka_status gka_backward_chunk(gka_shape shape, gka_chunk chunk, gka_window window, const float *x,
                                      const float *keys, const float *sigma, const float *y, const float *lse,
                                      const float *dy, float *dx, float *dx_keys, float *dsigma);

/* The library's version, "MAJOR.MINOR.PATCH": the project's (CMakeLists.txt,
 * project(VERSION)), as gka.pc and the shared library's file name give it. */
GKA_API const char *gka_version(void);

/* Message of the last failing call on this thread ("" if none). */
GKA_API const char *gka_last_error(void);

/* CPU target families compiled into the library, best first (gka_cpu_families:
 * the rows of cmake/families.tsv for the library's architecture). The family that
 * runs is the best one the host supports, unless GKA_CPU_TARGET (environment,
 * read once) or gka_set_cpu_family() forces one.
 * Forcing a family the host cannot run is an error, never a silent fallback.
 * GKA_HOST_FAMILIES (environment, read once; e.g. "generic,avx2") narrows the
 * families the host is taken to run, as if it lacked the others. */
GKA_API const char *gka_cpu_family(void);
GKA_API gka_status gka_set_cpu_family(const char *family); /* NULL or "" = best supported */
GKA_API int gka_cpu_family_supported(const char *family);  /* 1 if compiled in and runnable here */
GKA_API const char *gka_cpu_families(void); /* those compiled in, best first, comma-separated */

/* How the CPU kernels form |x_i - x_j|^2: three score forms, each with one
 * name here, in the kernels' names and in the docs (docs/accuracy.md).
 * "origin" and "centred" are the expansion |c_i|^2 + |c_j|^2 - 2 c_i.c_j, a
 * GEMM, over c = x ("origin": it saves the centring; the forward's, and the
 * bfloat16 backward's of a family with bfloat16 products, zen4) or
 * c = x minus the features' centre per (batch, head) ("centred": it takes out
 * a common offset); "direct" is the differences sum_d (x_id - x_jd)^2, which
 * meet the accuracy contract on every input at about twice the pair work.
 * The expansions meet it wherever max_t |c_t|^2 <= 64 sigma^2 per (batch,
 * head): each call's kernel reports that spread, and where it is exceeded the
 * call runs again with the next form (so a call that ends at "direct" costs
 * about three times the expansion's, four where the origin's ran first).
 * A description's gka_call.scores (GKA_SCORES_AUTO and so on) names the first
 * form its call tries; this process-wide setting names it for the older calls:
 * "auto" (the default): "origin" where sampled tokens are within the bound of
 *   the origin, else "centred";
 * "origin": the origin's, then the centred, then direct (a backward with no
 *   origin form starts at the centred);
 * "centred": the centred, then direct;
 * "direct": always the direct form.
 * "expansion" is accepted as an alias of "centred" (its former name);
 * gka_score_form() reports "centred". A backward whose every row attends to
 * itself alone (T = 1, window (0, 0)) runs direct.
 * gka_last_kernel() names the kernel that gave the results (..._origin,
 * ..._direct for those forms; no suffix for the centred form). The CUDA
 * kernels run the direct form alone, whatever the setting: choosing per call
 * would need the expansions' spread on the host, a synchronization of the
 * caller's stream. */
GKA_API gka_status gka_set_score_form(const char *form); /* "auto", "origin", "centred", "direct"; NULL or "" = "auto" */
GKA_API const char *gka_score_form(void);
/* Which kernel weighs the pairs (docs/spec.md, "Kernels"): w_ij = exp(s_ij)
 * with d2 = |x_i - x_j|^2 and
 *   "gaussian" (the default): s = -d2 / (2 sigma^2);
 *   "laplace":                s = -sqrt(d2) / sigma (its gradient's pull at
 *                             d2 = 0, the self pair and exact duplicates, is
 *                             taken as 0: the subgradient);
 *   "cauchy":                 s = -log(1 + d2 / sigma^2), weights
 *                             1 / (1 + d2 / sigma^2).
 * The setting is the calling thread's and applies to each later older call on
 * that thread, every one of them (host and CUDA, forward, backward, decode,
 * varlen, chunks, float32 and bf16) alike, and calls on other threads are not
 * affected; a description's gka_call.kernel is its own, whatever is set here.
 * The kernels other than the Gaussian run the direct score form, whatever
 * gka_set_score_form says (docs/accuracy.md says why); gka_last_kernel() names
 * them with "_laplace" or "_cauchy". NULL or "" = "gaussian". */
GKA_API gka_status gka_set_kernel(const char *kernel);
GKA_API const char *gka_kernel(void);
GKA_API const char *gka_kernels(void); /* every name, in gka_kernel_function's order: "gaussian,laplace,cauchy" */

/* The kernel variant that `pass` runs for this shape and window on `family`
 * (a name of gka_cpu_families() or gka_cuda_families()): "forward" or "backward"
 * name the centred form's variant, "forward_origin" the origin form's (the
 * forward's alone), "forward_direct" or "backward_direct" the
 * direct form's (on a CUDA family, each of these names the direct form's
 * variant, the only one it has); "forward_bf16",
 * "backward_bf16_direct" and so on, the bfloat16 calls'; "decode" and
 * "decode_bf16", gka_decode's (and gka_decode_cuda's; the shape's seq_len is ignored);
 * "forward_chunk", "backward_chunk", the chunks'; any of them followed by
 * "_laplace" or "_cauchy", that kernel's (direct) variant. Its name, e.g.
 * "gka_forward_avx512_d64_sliding", and in *knobs (unless knobs is NULL) the
 * schedule knobs it was compiled with ("name:value,..."; "" = the schedule's
 * defaults). The autotuner's table, schedules/tuned.tsv, gives knobs per shape
 * class (head dim, window kind, sequence-length range); a call runs the
 * variant of the narrowest class containing its shape. NULL if the family or
 * pass is unknown. */
GKA_API const char *gka_kernel_variant(const char *family, const char *pass, gka_shape shape, gka_window window,
                                       const char **knobs);
/* The variant that the last successful pass on this thread ran ("" if none). */
GKA_API const char *gka_last_kernel(void);

/* Frequencies for random-feature GKA (gka_call.features), W [heads][features][head_dim],
 * drawn from `seed`: the same values on every host and thread count. Rows of
 * standard normal entries (GKA's estimator: w ~ N(0, I)); or, with `orthogonal`,
 * blocks of head_dim rows orthogonal to one another, each row scaled to the norm
 * of a standard normal vector of its own (each row's distribution the same, the
 * estimate's variance lower: docs/random-features.md). */
GKA_API gka_status gka_draw_frequencies(int64_t heads, int64_t features, int64_t head_dim, uint64_t seed,
                                        int orthogonal, float *frequencies);

/* Worker threads of the CPU kernels: GKA_NUM_THREADS (environment) or the
 * number of cores, unless set here. */
GKA_API int gka_num_threads(void);
GKA_API gka_status gka_set_num_threads(int threads);

/* The CPU kernels' working memory: the buffers they allocate beyond the
 * caller's tensors, in bytes. A backward holds about four tensors the size of
 * x for the heads it runs at once, and runs a few heads at a time: enough for
 * the threads (docs/c-api.md, "Sizes"). Freed buffers up to 512 MiB are kept
 * for the next calls (idle), as an allocator's cache keeps them. */
typedef struct gka_memory {
    uint64_t in_use; /* held by the calls running now */
    uint64_t peak;   /* the most held at once since the library loaded or gka_reset_memory_peak */
    uint64_t idle;   /* freed, kept for the next calls */
} gka_memory;
GKA_API gka_memory gka_memory_usage(void);
GKA_API void gka_reset_memory_peak(void); /* the peak restarts from what is in use */

/* CUDA. The same passes on NVIDIA GPUs: every pointer (sigma and dsigma
 * included) is device memory of the CUDA context current on the calling thread
 * (device 0's primary context if none is), and the work is enqueued on
 * `stream` (a CUstream / cudaStream_t; NULL = the legacy default stream): the
 * call may return before the results are ready, and the caller synchronizes as
 * for its own kernels. Shapes, windows and pointers are validated as in the
 * host calls, before anything is enqueued; sigma's values are NOT checked (they
 * live on the device: a sigma <= 0 or non-finite gives non-finite outputs).
 * libgka does not link the CUDA driver: it opens libcuda on the first device
 * call, and returns GKA_ERR_DEVICE with the driver's message if there is no
 * driver or device, or if a kernel fails to launch. Deterministic, as the CPU
 * kernels are (no atomics); the CUDA and CPU results agree to float rounding. */
GKA_API gka_status gka_forward_cuda(gka_shape shape, gka_window window, const float *x, const float *sigma,
                                    float *y, float *lse, void *stream);
GKA_API gka_status gka_backward_cuda(gka_shape shape, gka_window window, const float *x, const float *sigma,
                                     const float *y, const float *lse, const float *dy, float *dx, float *dsigma,
                                     void *stream);
/* The same with bfloat16 features (x, y, dy, dx), as gka_forward_bf16: loaded
 * and stored as bfloat16, computed in float; sigma, lse and dsigma float32. */
GKA_API gka_status gka_forward_bf16_cuda(gka_shape shape, gka_window window, const gka_bf16 *x, const float *sigma,
                                         gka_bf16 *y, float *lse, void *stream);
GKA_API gka_status gka_backward_bf16_cuda(gka_shape shape, gka_window window, const gka_bf16 *x,
                                          const float *sigma, const gka_bf16 *y, const float *lse,
                                          const gka_bf16 *dy, gka_bf16 *dx, float *dsigma, void *stream);
/* gka_decode on the device: x, cache, y and lse device memory; cache_lens
 * host memory (validated as gka_decode's, before anything is enqueued). The
 * new tokens are written into the cache on `stream` after the kernels. */
GKA_API gka_status gka_decode_cuda(gka_shape shape, int64_t capacity, gka_window window, const float *x,
                                   const float *sigma, const int64_t *cache_lens, float *cache, float *y, float *lse,
                                   void *stream);
GKA_API gka_status gka_decode_bf16_cuda(gka_shape shape, int64_t capacity, gka_window window, const gka_bf16 *x,
                                        const float *sigma, const int64_t *cache_lens, gka_bf16 *cache, gka_bf16 *y,
                                        float *lse, void *stream);
/* gka_forward_varlen and gka_backward_varlen on the device (and their bf16
 * forms): x, sigma, y, lse, dy, dx and dsigma device memory; cu_seqlens host
 * memory, validated as the host calls' before anything is enqueued. Each
 * sequence runs as its own device call on `stream`. The backward adds the
 * sequences' dsigma in order on the host, as gka_backward_varlen does: it
 * waits for `stream` once, before dsigma's copy back is enqueued. */
GKA_API gka_status gka_forward_varlen_cuda(gka_shape shape, const int64_t *cu_seqlens, gka_window window,
                                           const float *x, const float *sigma, float *y, float *lse, void *stream);
GKA_API gka_status gka_backward_varlen_cuda(gka_shape shape, const int64_t *cu_seqlens, gka_window window,
                                            const float *x, const float *sigma, const float *y, const float *lse,
                                            const float *dy, float *dx, float *dsigma, void *stream);
GKA_API gka_status gka_forward_varlen_bf16_cuda(gka_shape shape, const int64_t *cu_seqlens, gka_window window,
                                                const gka_bf16 *x, const float *sigma, gka_bf16 *y, float *lse,
                                                void *stream);
GKA_API gka_status gka_backward_varlen_bf16_cuda(gka_shape shape, const int64_t *cu_seqlens, gka_window window,
                                                 const gka_bf16 *x, const float *sigma, const gka_bf16 *y,
                                                 const float *lse, const gka_bf16 *dy, gka_bf16 *dx, float *dsigma,
                                                 void *stream);
/* gka_forward_chunk and gka_backward_chunk on the device (float32; a chunk
 * with no pair in the window fills its outputs on `stream`, no kernel). */
GKA_API gka_status gka_forward_chunk_cuda(gka_shape shape, gka_chunk chunk, gka_window window, const float *x,
                                          const float *keys, const float *sigma, float *y, float *lse, void *stream);
GKA_API gka_status gka_backward_chunk_cuda(gka_shape shape, gka_chunk chunk, gka_window window, const float *x,
                                           const float *keys, const float *sigma, const float *y, const float *lse,
                                           const float *dy, float *dx, float *dx_keys, float *dsigma, void *stream);
/* 1 if this libgka has the CUDA kernels compiled in. */
GKA_API int gka_cuda_compiled(void);
/* The CUDA families compiled in, best first ("cuda86,cuda": PTX for compute
 * capability 8.6 and 8.0, cmake/families.tsv). A call runs the best one the
 * device of the calling thread's current context has (gka_last_kernel() names
 * it); a device older than all of them gets GKA_ERR_UNSUPPORTED. */
GKA_API const char *gka_cuda_families(void);
/* 1 if the CUDA kernels can run here (driver loaded, cuInit succeeded, a device
 * present); 0 otherwise, with gka_last_error() saying why. */
GKA_API int gka_cuda_available(void);

#ifdef __cplusplus
}
#endif

#endif /* GKA_GKA_H */
