// libgka's settings and queries (gka.h): errors, CPU families, threads, the
// older calls' kernel function and score form, the variants compiled in; and
// the rules the host and device halves share (internal.h). The compute calls
// are call.cpp's; the kernels the AOT-compiled pipelines (kernel_variants.cpp).
#include "gka/gka.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <iterator>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "HalideRuntime.h"
#include "block_cache.h"
#include "denormals.h"
#include "kernel_variants.h"
#include "internal.h"

namespace {

using gka::CpuFamily;

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
// gka_set_score_form: the older calls' first score form (gka_call.scores for
// them). The names in gka_score_policy's order.
const char *const score_setting_names[] = {"auto", "origin", "centred", "direct"};
std::atomic<gka_score_policy> score_setting{GKA_SCORES_AUTO};
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
constexpr int64_t max_elements = INT32_MAX;  // check_decode's cache; call.cpp checks the tensors

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
gka::KernelFunction thread_kernel_function() { return ::kernel_function; }
gka_score_policy process_score_policy() { return score_setting; }
const gka::CpuFamily *cpu_family() { return current_family(); }

std::string shape_text(const gka_shape &s) {
    return "shape (batch=" + std::to_string(s.batch) + ", seq_len=" + std::to_string(s.seq_len) +
           ", heads=" + std::to_string(s.heads) + ", head_dim=" + std::to_string(s.head_dim) + ")";
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

extern "C" {

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
    const gka::WindowKind kind = gka::window_kind(window.left, window.right, shape.seq_len);
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
    // suffix says; an origin suffix names a CPU forward's or backward's alone.
    if (origin && p != "forward" && p != "backward") {
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
            score_setting = gka_score_policy(k);
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

gka_memory gka_memory_usage(void) {
    const gka::WorkingMemory m = gka::working_memory();
    return {m.in_use, m.peak, m.idle};
}

void gka_reset_memory_peak(void) { gka::reset_working_memory_peak(); }

}  // extern "C"
