// libgka's C ABI: argument validation, CPU family dispatch, threads and errors.
// The kernels themselves are the AOT-compiled Halide pipelines (kernel_variants.cpp).
#include "gka/gka.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <iterator>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "HalideBuffer.h"
#include "HalideRuntime.h"
#include "block_cache.h"
#include "buffers.h"
#include "denormals.h"
#include "kernel_variants.h"
#include "internal.h"

namespace {

using gka::CpuFamily;
using Halide::Runtime::Buffer;

thread_local std::string last_error;
thread_local const char *last_kernel = "";
thread_local int last_rank = -1;  // last_kernel's fallback rank (internal.h)
// gka_set_kernel: the calling thread's, so that threads running different
// kernels at once (a trainer's, a test's) never see one another's.
thread_local gka::KernelFunction kernel_function = gka::KernelFunction::gaussian;

gka_status fail(gka_status status, std::string message) {
    last_error = std::move(message);
    return status;
}

// Halide reports pipeline errors through this handler, on the calling thread
// for everything checked before the parallel loops start.
void record_halide_error(void *, const char *message) { last_error = std::string("halide: ") + message; }

std::atomic<const CpuFamily *> forced_family{nullptr};
// gka_set_score_form: the first form a call tries (score_form.h's names),
// each next one until one serves the inputs, direct last; "auto" starts about
// the origin only where sampled tokens allow. In the enum's order.
enum class ScoreSetting { automatic, origin, centred, direct };
const char *const score_setting_names[] = {"auto", "origin", "centred", "direct"};
std::atomic<ScoreSetting> score_setting{ScoreSetting::automatic};
std::string startup_error;  // a bad GKA_CPU_TARGET / GKA_NUM_THREADS, reported by every call
std::once_flag initialized;

// GKA_HOST_FAMILIES (a comma-separated list, read once) narrows the families
// the host is taken to run: a big machine can then stand in for a small one,
// and the tests run the errors of a host that lacks a family on every host.
// Its list as ",a,b,", "" when unset.
const std::string &host_families_listed() {
    static const std::string listed = [] {
        const char *list = std::getenv("GKA_HOST_FAMILIES");
        return list ? "," + std::string(list) + "," : std::string();
    }();
    return listed;
}

bool host_runs(const CpuFamily &f) {
    const std::string &listed = host_families_listed();
    if (!listed.empty() && listed.find("," + std::string(f.name) + ",") == std::string::npos) return false;
    return f.host_supports();
}

const CpuFamily *best_supported_family() {
    int n = 0;
    const CpuFamily *families = gka::cpu_families(&n);
    for (int k = 0; k < n; k++) {
        if (host_runs(families[k])) return &families[k];
    }
    return nullptr;
}

gka_status force_family(const char *name) {
    if (name == nullptr || *name == '\0') {
        forced_family = nullptr;
        return GKA_OK;
    }
    const CpuFamily *f = gka::find_cpu_family(name);
    if (f == nullptr) {
        return fail(GKA_ERR_INVALID_ARGUMENT,
                    std::string("unknown CPU family '") + name + "' (families: " + gka_cpu_families() + ")");
    }
    if (!host_runs(*f)) {
        return fail(GKA_ERR_UNSUPPORTED, std::string("CPU family '") + name + "' cannot run on this host" +
                                             (host_families_listed().empty() ? "" : " (GKA_HOST_FAMILIES)"));
    }
    forced_family = f;
    return GKA_OK;
}

void initialize() {
    halide_set_error_handler(record_halide_error);
    gka::install_block_cache();
    gka::install_denormal_flushing();
    halide_set_num_threads(int(std::max(1u, std::thread::hardware_concurrency())));
    if (const char *threads = std::getenv("GKA_NUM_THREADS")) {
        char *end = nullptr;
        long n = std::strtol(threads, &end, 10);
        if (*threads == '\0' || *end != '\0' || n < 1 || n > 1024) {
            startup_error = std::string("GKA_NUM_THREADS='") + threads + "' is not a thread count in 1..1024";
        } else {
            halide_set_num_threads(int(n));
        }
    }
    if (const char *family = std::getenv("GKA_CPU_TARGET")) {
        if (force_family(family) != GKA_OK) startup_error = "GKA_CPU_TARGET: " + last_error;
    }
}

// The family that runs now, or null with the error recorded.
const CpuFamily *current_family() {
    std::call_once(initialized, initialize);
    if (!startup_error.empty()) {
        fail(GKA_ERR_UNSUPPORTED, startup_error);
        return nullptr;
    }
    const CpuFamily *f = forced_family.load();
    if (f == nullptr) f = best_supported_family();
    if (f == nullptr) {
        fail(GKA_ERR_UNSUPPORTED, std::string("no compiled family runs here: this CPU lacks the features of each of ") +
                                      gka_cpu_families() + " (cmake/families.tsv), or GKA_HOST_FAMILIES names none it has");
    }
    return f;
}

// The kernels index buffers with 32-bit integers.
constexpr int64_t max_elements = INT32_MAX;

}  // namespace

namespace gka::internal {

gka_status fail(gka_status status, std::string message) { return ::fail(status, std::move(message)); }
void clear_error() { last_error.clear(); }
const std::string &last_message() { return last_error; }
gka_status from_halide(int code, const std::string &where, gka_status other) {
    if (code == 0) return GKA_OK;
    const bool memory = code == halide_error_code_out_of_memory || code == halide_error_code_device_malloc_failed;
    return ::fail(memory ? GKA_ERR_OUT_OF_MEMORY : other,
                  where + ": error " + std::to_string(code) + ": " + last_error);
}
gka_status ran(const char *kernel, int code, gka_status other, int fallback_rank) {
    gka_status s = from_halide(code, kernel, other);
    if (s == GKA_OK) last_kernel = kernel, last_rank = fallback_rank;
    return s;
}
int last_fallback_rank() { return last_rank; }
void initialize_once() { std::call_once(initialized, initialize); }
gka::KernelFunction kernel_function() { return ::kernel_function; }
const gka::CpuFamily *cpu_family() { return current_family(); }

gka_status check_arguments(const gka_shape &s, const gka_window &w, const float *sigma,
                           std::initializer_list<std::pair<const void *, const char *>> pointers,
                           bool sigma_on_host) {
    if (s.batch < 1 || s.seq_len < 1 || s.heads < 1 || s.head_dim < 1) {
        return fail(GKA_ERR_INVALID_ARGUMENT, "shape (batch=" + std::to_string(s.batch) +
                                                  ", seq_len=" + std::to_string(s.seq_len) +
                                                  ", heads=" + std::to_string(s.heads) +
                                                  ", head_dim=" + std::to_string(s.head_dim) +
                                                  "): every dimension must be >= 1");
    }
    for (const auto &[pointer, name] : pointers) {
        if (pointer == nullptr) return fail(GKA_ERR_INVALID_ARGUMENT, std::string(name) + " is NULL");
    }
    if (w.left < -1 || w.right < -1) {
        return fail(GKA_ERR_INVALID_ARGUMENT, "window (" + std::to_string(w.left) + ", " +
                                                  std::to_string(w.right) + "): left and right must be >= -1");
    }
    // Checked before sigma is read, so that a shape past the limit is refused
    // without scanning sigma over the heads it claims.
    __int128 elements = __int128(s.batch) * s.seq_len * s.heads * s.head_dim;
    if (elements > max_elements) {
        return fail(GKA_ERR_UNSUPPORTED, "shape has " + std::to_string(int64_t(elements > INT64_MAX ? INT64_MAX : elements)) +
                                             " elements per tensor; the kernels address at most 2^31 - 1");
    }
    for (int64_t h = 0; sigma_on_host && h < s.heads; h++) {
        if (!std::isfinite(sigma[h]) || !(sigma[h] > 0.0f)) {
            return fail(GKA_ERR_INVALID_ARGUMENT, "sigma[" + std::to_string(h) + "] = " + std::to_string(sigma[h]) +
                                                      ": each sigma must be finite and > 0");
        }
    }
    return GKA_OK;
}

KernelWindow kernel_window(const gka_window &w, int64_t seq_len) {
    auto clamp = [&](int64_t span) { return span < 0 ? -1 : int32_t(std::min(span, seq_len)); };
    return {clamp(w.left), clamp(w.right)};
}

gka_status check_decode(const gka_shape &shape, int64_t capacity, const gka_window &window,
                        const int64_t *cache_lens) {
    if (window.right != 0) {
        return fail(GKA_ERR_INVALID_ARGUMENT, "decode window (" + std::to_string(window.left) + ", " +
                                                  std::to_string(window.right) +
                                                  "): the right span must be 0 (the new tokens' future is not there)");
    }
    if (capacity < 1) return fail(GKA_ERR_INVALID_ARGUMENT, "cache capacity " + std::to_string(capacity) + " < 1");
    if (__int128(shape.batch) * capacity * shape.heads * shape.head_dim > max_elements) {
        return fail(GKA_ERR_UNSUPPORTED, "the cache has more than 2^31 - 1 elements, the most the kernels address");
    }
    // A bounded window (left, 0) is a ring: the first new token reaches `left`
    // positions back, so the cache must hold the last `left` tokens, and then
    // serves a sequence of any length. Refused here, at the first call, rather
    // than at the call where the sequence outgrows the capacity.
    const bool ring = window.left >= 0;
    if (ring && window.left > capacity) {
        return fail(GKA_ERR_INVALID_ARGUMENT,
                    "decode window (" + std::to_string(window.left) + ", 0) reaches " + std::to_string(window.left) +
                        " tokens back: the cache needs capacity >= " + std::to_string(window.left) + ", got " +
                        std::to_string(capacity) +
                        " (or the causal window (-1, 0) with capacity >= the longest sequence)");
    }
    for (int64_t b = 0; b < shape.batch; b++) {
        const int64_t length = cache_lens[b];
        if (length < 0 || length > INT32_MAX - shape.seq_len) {
            return fail(GKA_ERR_INVALID_ARGUMENT, "cache_lens[" + std::to_string(b) + "] = " + std::to_string(length) +
                                                      ": must be in 0..2^31 - 1 - new tokens");
        }
        if (!ring && length + shape.seq_len > capacity) {
            return fail(GKA_ERR_INVALID_ARGUMENT,
                        "cache_lens[" + std::to_string(b) + "] = " + std::to_string(length) + " + " +
                            std::to_string(shape.seq_len) + " new tokens do not fit a cache of capacity " +
                            std::to_string(capacity) + " under the causal window: it needs capacity >= " +
                            std::to_string(length + shape.seq_len));
        }
    }
    return GKA_OK;
}

}  // namespace gka::internal

namespace {

using gka::internal::check_arguments;
using gka::internal::check_decode;
using gka::internal::ElementOf;
using gka::internal::features;
using gka::internal::kernel_window;
using gka::internal::per_head;
using gka::internal::rows;
using gka::internal::KernelWindow;

gka::WindowKind window_kind(const gka_window &w, const gka_shape &s) {
    return gka::window_kind(w.left, w.right, s.seq_len);
}

// Whether the expansion's scores meet the accuracy contract (docs/spec.md) on these
// inputs: each score's rounding is about eps * sqrt(D) * |c|^2 / sigma^2 for
// features c about the variant's centre (the origin's: x itself), and its
// weight's relative error the same. Where some
// (head, batch) has max_t |c_t|^2 above expansion_limit * sigma_h^2 (tokens
// far apart in units of sigma, whose near neighbours, if any, would get
// scores of noise), the next form runs instead. tests/test_accuracy.cpp
// probes this boundary.
constexpr double expansion_limit = 64;
bool expansion_serves(const Buffer<float, 2> &spread, const float *sigma) {
    for (int b = 0; b < spread.dim(1).extent(); b++)
        for (int h = 0; h < spread.dim(0).extent(); h++) {
            const double var = double(sigma[h]) * sigma[h];
            if (!(spread(h, b) <= expansion_limit * var)) return false;
        }
    return true;
}

// Every row's only key is itself: the direct form gives the exact dx = dy,
// dsigma = 0 (its dS is dy . (x_i - y_i), and y_i = x_i).
bool self_only(const gka::internal::KernelWindow &w, const gka_shape &s) {
    return s.seq_len == 1 || (w.left == 0 && w.right == 0);
}

// Whether the forward's expansion about the origin may serve these inputs:
// sampled tokens (16 spread over the sequence, in up to 4 batch entries: at
// most 64 a head, whatever the call's size) lie within the expansion's
// bound of the origin. The kernel's spread, over every token, decides; this
// test spares a run that the samples already rule out (features with a
// common offset), so that such calls cost one expansion, not two.
template <class T>
bool origin_may_serve(const T *x, const gka_shape &s, const float *sigma) {
    const int64_t tokens = std::min<int64_t>(s.seq_len, 16), batches = std::min<int64_t>(s.batch, 4);
    for (int64_t m = 0; m < batches; m++)
        for (int64_t n = 0; n < tokens; n++) {
            const int64_t b = m * s.batch / batches, t = n * s.seq_len / tokens;
            const T *token = x + ((b * s.seq_len + t) * s.heads) * s.head_dim;
            for (int64_t h = 0; h < s.heads; h++) {
                double norm = 0;
                for (int64_t d = 0; d < s.head_dim; d++) {
                    const double v = ElementOf<T>::value(token[h * s.head_dim + d]);
                    norm += v * v;
                }
                if (!(norm <= expansion_limit * double(sigma[h]) * sigma[h])) return false;
            }
        }
    return true;
}

// Runs the score forms a call tries, in turn, of those the build compiled
// (kernels/variants.py: the expansions for the Gaussian alone, whose origin
// form the forward's alone; the direct form, which serves every input): the
// origin's expansion where `origin`, the centred one where `centred`, then the
// direct form, each until one serves the inputs. `pick` gives a form's variant
// (null: not compiled), `run` runs one, writing the spread; `not_built` is the
// error of a call that no compiled form serves.
template <class Pick, class Run, class NotBuilt>
gka_status run_serving_form(bool origin, bool centred, Pick pick, Run run, const Buffer<float, 2> &spread,
                            const float *sigma, NotBuilt not_built) {
    const std::pair<gka::ScoreForm, bool> forms[] = {
        {gka::ScoreForm::origin, origin}, {gka::ScoreForm::centred, centred}, {gka::ScoreForm::direct, true}};
    for (const auto &[form, wanted] : forms) {
        const auto *k = wanted ? pick(form) : nullptr;
        if (k == nullptr) continue;
        const int code = run(k);
        if (code != 0 || form == gka::ScoreForm::direct || expansion_serves(spread, sigma)) {
            return gka::internal::ran(k, code, GKA_ERR_INTERNAL);
        }
    }
    return not_built();
}

template <class T>
gka_status forward(gka_shape shape, gka_window window, const T *x, const float *sigma, T *y, float *lse) {
    last_error.clear();
    if (gka_status s = check_arguments(shape, window, sigma, {{x, "x"}, {sigma, "sigma"}, {y, "y"}, {lse, "lse"}});
        s != GKA_OK) {
        return s;
    }
    const CpuFamily *f = current_family();
    if (f == nullptr) return GKA_ERR_UNSUPPORTED;
    auto xb = features(x, shape), yb = features(y, shape);
    auto sb = per_head(sigma, shape);
    auto lb = rows(lse, shape);
    const KernelWindow w = kernel_window(window, shape.seq_len);
    const auto kind = window_kind(window, shape);
    Buffer<float, 2> spread(int(shape.heads), int(shape.batch));
    gka::DenormalsFlushed flushed;
    const ScoreSetting setting = score_setting;
    auto pick = [&](gka::ScoreForm form) {
        return gka::forward_variant(f->name, kernel_function, shape.head_dim, kind, shape.seq_len, form,
                                    ElementOf<T>::element);
    };
    // The origin's samples are read only where its variant exists (the Gaussian's).
    const bool origin = pick(gka::ScoreForm::origin) != nullptr &&
                        (setting == ScoreSetting::origin ||
                         (setting == ScoreSetting::automatic && origin_may_serve(x, shape, sigma)));
    return run_serving_form(
        origin, setting != ScoreSetting::direct, pick,
        [&](const auto *k) { return k->run(xb, sb, w.left, w.right, yb, lb, spread); }, spread, sigma,
        [&] { return gka::not_built("forward", f->name, kernel_function, shape.head_dim, ElementOf<T>::element); });
}

template <class T>
gka_status backward(gka_shape shape, gka_window window, const T *x, const float *sigma, const T *y, const float *lse,
                    const T *dy, T *dx, float *dsigma) {
    last_error.clear();
    if (gka_status s = check_arguments(shape, window, sigma,
                                       {{x, "x"}, {sigma, "sigma"}, {y, "y"}, {lse, "lse"}, {dy, "dy"},
                                        {dx, "dx"}, {dsigma, "dsigma"}});
        s != GKA_OK) {
        return s;
    }
    const CpuFamily *f = current_family();
    if (f == nullptr) return GKA_ERR_UNSUPPORTED;
    auto xb = features(x, shape), yb = features(y, shape), dyb = features(dy, shape), dxb = features(dx, shape);
    auto sb = per_head(sigma, shape), dsb = per_head(dsigma, shape);
    auto lb = rows(lse, shape);
    const KernelWindow w = kernel_window(window, shape.seq_len);
    const auto kind = window_kind(window, shape);
    Buffer<float, 2> spread(int(shape.heads), int(shape.batch));
    gka::DenormalsFlushed flushed;
    return run_serving_form(
        false, score_setting != ScoreSetting::direct && !self_only(w, shape),
        [&](gka::ScoreForm form) {
            return gka::backward_variant(f->name, kernel_function, shape.head_dim, kind, shape.seq_len, form,
                                         ElementOf<T>::element);
        },
        [&](const auto *k) { return k->run(xb, sb, yb, lb, dyb, w.left, w.right, dxb, dsb, spread); }, spread,
        sigma,
        [&] { return gka::not_built("backward", f->name, kernel_function, shape.head_dim, ElementOf<T>::element); });
}

template <class T>
gka_status decode(gka_shape shape, int64_t capacity, gka_window window, const T *x, const float *sigma,
                  const int64_t *cache_lens, T *cache, T *y, float *lse) {
    last_error.clear();
    if (gka_status s = check_arguments(shape, window, sigma,
                                       {{x, "x"}, {sigma, "sigma"}, {cache_lens, "cache_lens"}, {cache, "cache"},
                                        {y, "y"}, {lse, "lse"}});
        s != GKA_OK) {
        return s;
    }
    if (gka_status s = check_decode(shape, capacity, window, cache_lens); s != GKA_OK) return s;
    const CpuFamily *f = current_family();
    if (f == nullptr) return GKA_ERR_UNSUPPORTED;
    gka_shape cache_shape = shape;
    cache_shape.seq_len = capacity;
    auto xb = features(x, shape), yb = features(y, shape), cb = features(cache, cache_shape);
    auto sb = per_head(sigma, shape);
    auto lb = rows(lse, shape);
    Buffer<int32_t, 1> lengths(int(shape.batch));
    for (int64_t b = 0; b < shape.batch; b++) lengths(int(b)) = int32_t(cache_lens[b]);
    // A span past the capacity reaches what a span of the capacity does (check_decode).
    const int32_t left = kernel_window(window, capacity).left;
    const auto *k = gka::decode_variant(f->name, kernel_function, shape.head_dim, ElementOf<T>::element);
    if (k == nullptr) {
        return gka::not_built("decode", f->name, kernel_function, shape.head_dim, ElementOf<T>::element);
    }
    gka::DenormalsFlushed flushed;
    if (gka_status s = gka::internal::ran(k, k->run(xb, cb, lengths, sb, left, yb, lb), GKA_ERR_INTERNAL);
        s != GKA_OK) {
        return s;
    }
    // The new tokens' features into their slots: the last `capacity` of them.
    const int64_t row = shape.heads * shape.head_dim;
    for (int64_t b = 0; b < shape.batch; b++) {
        for (int64_t q = std::max<int64_t>(0, shape.seq_len - capacity); q < shape.seq_len; q++) {
            const int64_t slot = (cache_lens[b] + q) % capacity;
            std::copy_n(x + (b * shape.seq_len + q) * row, row, cache + (b * capacity + slot) * row);
        }
    }
    return GKA_OK;
}

}  // namespace

extern "C" {

gka_status gka_decode(gka_shape shape, int64_t capacity, gka_window window, const float *x, const float *sigma,
                      const int64_t *cache_lens, float *cache, float *y, float *lse) {
    return decode(shape, capacity, window, x, sigma, cache_lens, cache, y, lse);
}

gka_status gka_decode_bf16(gka_shape shape, int64_t capacity, gka_window window, const gka_bf16 *x,
                           const float *sigma, const int64_t *cache_lens, gka_bf16 *cache, gka_bf16 *y, float *lse) {
    return decode(shape, capacity, window, x, sigma, cache_lens, cache, y, lse);
}

gka_status gka_forward(gka_shape shape, gka_window window, const float *x, const float *sigma, float *y,
                       float *lse) {
    return forward(shape, window, x, sigma, y, lse);
}

gka_status gka_backward(gka_shape shape, gka_window window, const float *x, const float *sigma, const float *y,
                        const float *lse, const float *dy, float *dx, float *dsigma) {
    return backward(shape, window, x, sigma, y, lse, dy, dx, dsigma);
}

gka_status gka_forward_bf16(gka_shape shape, gka_window window, const gka_bf16 *x, const float *sigma, gka_bf16 *y,
                            float *lse) {
    return forward(shape, window, x, sigma, y, lse);
}

gka_status gka_backward_bf16(gka_shape shape, gka_window window, const gka_bf16 *x, const float *sigma,
                             const gka_bf16 *y, const float *lse, const gka_bf16 *dy, gka_bf16 *dx, float *dsigma) {
    return backward(shape, window, x, sigma, y, lse, dy, dx, dsigma);
}

const char *gka_last_error(void) { return last_error.c_str(); }

// CMake passes project(VERSION) (runtime/CMakeLists.txt).
#ifndef GKA_VERSION
#error "GKA_VERSION (the project's version) is not defined"
#endif
const char *gka_version(void) { return GKA_VERSION; }

const char *gka_cpu_family(void) {
    const CpuFamily *f = current_family();
    return f ? f->name : "none";
}

gka_status gka_set_cpu_family(const char *family) {
    last_error.clear();
    std::call_once(initialized, initialize);
    return force_family(family);
}

const char *gka_cpu_families(void) {
    static const std::string listed = [] {
        int n = 0;
        const CpuFamily *families = gka::cpu_families(&n);
        return gka::internal::joined_names(families, families + n);
    }();
    return listed.c_str();
}

int gka_cpu_family_supported(const char *family) {
    const CpuFamily *f = family ? gka::find_cpu_family(family) : nullptr;
    return f != nullptr && host_runs(*f);
}

const char *gka_kernel_variant(const char *family, const char *pass, gka_shape shape, gka_window window,
                               const char **knobs) {
    if (family == nullptr || pass == nullptr) return nullptr;
    const gka::WindowKind kind = window_kind(window, shape);
    const char *name = nullptr, *compiled_knobs = nullptr;
    auto pick = [&](const auto *variant) {
        if (variant) name = variant->name, compiled_knobs = variant->knobs;
    };
    // "forward" or "backward", then "_bf16" for bfloat16 features, then
    // "_origin" or "_direct", then a kernel function's name but the Gaussian's.
    std::string p = pass;
    auto strip = [&](const std::string &suffix) {
        const bool has = p.size() > suffix.size() && p.compare(p.size() - suffix.size(), suffix.size(), suffix) == 0;
        if (has) p.resize(p.size() - suffix.size());
        return has;
    };
    gka::KernelFunction function = gka::KernelFunction::gaussian;
    for (size_t k = 1; k < std::size(gka::kernel_function_names); k++) {
        if (strip(std::string("_") + gka::kernel_function_names[k])) function = gka::KernelFunction(k);
    }
    const bool direct = strip("_direct"), origin = !direct && strip("_origin");
    const bool bf16 = strip("_bf16");
    const gka::Element element = bf16 ? gka::Element::bf16 : gka::Element::f32;
    // The CPU forward and backward by form: the suffix's, else the centred
    // form's, or where the build has none (a kernel function other than the
    // Gaussian: kernels/variants.py) the direct form's.
    std::vector<gka::ScoreForm> forms{gka::ScoreForm::centred, gka::ScoreForm::direct};
    if (direct || origin) forms = {direct ? gka::ScoreForm::direct : gka::ScoreForm::origin};
    for (gka::ScoreForm scores : forms) {
        if (p == "forward") {
            pick(gka::forward_variant(family, function, shape.head_dim, kind, shape.seq_len, scores, element));
        } else if (p == "backward") {
            pick(gka::backward_variant(family, function, shape.head_dim, kind, shape.seq_len, scores, element));
        }
        if (name) break;
    }
    // The passes of the direct form alone, and a CUDA family's variants (a CPU
    // family's name finds none), which are the direct form's whatever the
    // suffix says; the origin form is the forward's alone.
    if (origin && p != "forward") {
        return nullptr;
    } else if (p == "forward") {
        pick(gka::cuda_forward_variant(family, function, shape.head_dim, kind, shape.seq_len, element));
    } else if (p == "backward") {
        pick(gka::cuda_backward_variant(family, function, shape.head_dim, kind, shape.seq_len, element));
    } else if (p == "decode") {
        pick(gka::decode_variant(family, function, shape.head_dim, element));
        pick(gka::cuda_decode_variant(family, function, shape.head_dim, element));
    } else if (p == "forward_chunk" && !bf16) {
        pick(gka::forward_chunk_variant(family, function, shape.head_dim));
        pick(gka::cuda_forward_chunk_variant(family, function, shape.head_dim));
    } else if (p == "backward_chunk" && !bf16) {
        pick(gka::backward_chunk_variant(family, function, shape.head_dim));
        pick(gka::cuda_backward_chunk_variant(family, function, shape.head_dim));
    }
    if (name && knobs) *knobs = compiled_knobs;
    return name;
}

const char *gka_last_kernel(void) { return last_kernel; }

gka_status gka_set_score_form(const char *form) {
    last_error.clear();
    std::string f = form && *form ? form : "auto";
    if (f == "expansion") f = "centred";  // the centred form's former name, kept for older callers
    for (size_t k = 0; k < std::size(score_setting_names); k++) {
        if (f == score_setting_names[k]) {
            score_setting = ScoreSetting(k);
            return GKA_OK;
        }
    }
    return fail(GKA_ERR_INVALID_ARGUMENT, "unknown score form '" + f + "' (forms: auto, origin, centred, direct)");
}

const char *gka_score_form(void) { return score_setting_names[int(score_setting.load())]; }

gka_status gka_set_kernel(const char *kernel) {
    last_error.clear();
    const std::string name = kernel && *kernel ? kernel : "gaussian";
    for (size_t k = 0; k < std::size(gka::kernel_function_names); k++) {
        if (name == gka::kernel_function_names[k]) {
            kernel_function = gka::KernelFunction(k);
            return GKA_OK;
        }
    }
    return fail(GKA_ERR_INVALID_ARGUMENT, "unknown kernel '" + name + "' (kernels: " + gka_kernels() + ")");
}

const char *gka_kernel(void) { return gka::kernel_function_names[int(kernel_function)]; }

const char *gka_kernels(void) {
    static const std::string listed = [] {
        std::string names;
        for (const char *name : gka::kernel_function_names) names += (names.empty() ? "" : ",") + std::string(name);
        return names;
    }();
    return listed.c_str();
}

int gka_num_threads(void) {
    std::call_once(initialized, initialize);
    return halide_get_num_threads();
}

gka_status gka_set_num_threads(int threads) {
    last_error.clear();
    std::call_once(initialized, initialize);
    if (threads < 1 || threads > 1024) {
        return fail(GKA_ERR_INVALID_ARGUMENT, "thread count " + std::to_string(threads) + " is not in 1..1024");
    }
    halide_set_num_threads(threads);
    return GKA_OK;
}

}  // extern "C"
