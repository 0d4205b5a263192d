// libFuzzer target over libgka's C ABI. Each input decodes into one call
// (forward and backward) on a CPU family, score form and thread count it
// picks, through the call description (gka_run_forward, its fields drawn) or
// through the older calls that wrap it:
// - a valid problem, from the randomized accuracy test's generator or at the
//   validator's edges (head dims to 130, any window), judged against the
//   double reference by docs/spec.md's accuracy contract (also through the
//   bfloat16 calls, by the bfloat16 contract);
// - an invalid one (a dimension < 0, or 0 in an older call, a window bound <
//   -1, a NULL pointer, a sigma not finite and > 0, a shape past 32-bit
//   indexing; a description's size, field value or batch layout), which must
//   fail with a message and write nothing;
// - a description with a zero dimension, whose exact results (lse the log of
//   each row's key count where only D is 0) it must write, and nothing else;
// - non-finite features, whose outputs the contract leaves open but which
//   must return and stay within the outputs;
// - packed variable-length sequences, with cu_seqlens valid (each sequence's
//   results are its own call's, bit for bit) or broken (refused, nothing written).
// Every buffer sits between canaries, and inputs must come back unchanged.
// A failure prints what broke and aborts, so libFuzzer keeps the input.
#include <fuzzer/FuzzedDataProvider.h>

#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "../generators/kernel_function.h"
#include "bfloat16.h"
#include "contract.h"
#include "families.h"
#include "gka/gka.h"
#include "random_problem.h"

namespace {

class BytesDraws : public gka_test::Draws {
public:
    explicit BytesDraws(FuzzedDataProvider &bytes) : bytes_(bytes) {}
    int64_t uniform(int64_t lo, int64_t hi) override { return bytes_.ConsumeIntegralInRange(lo, hi); }
    double unit() override { return bytes_.ConsumeProbability<double>(); }
    uint64_t bits() override { return bytes_.ConsumeIntegral<uint64_t>(); }

private:
    FuzzedDataProvider &bytes_;
};

[[noreturn]] void broken(const std::string &what) {
    std::fprintf(stderr, "gka_fuzz: %s (last kernel %s, last error '%s')\n", what.c_str(), gka_last_kernel(),
                 gka_last_error());
    std::abort();
}

// n values between canaries: whatever runs may touch the n values and nothing
// beside them. T: float, or gka_bf16 (bfloat16's bits).
template <class T>
class Guarded {
public:
    Guarded(const std::vector<T> &values) : v_(pad, canary()), values_(values) {
        v_.insert(v_.end(), values.begin(), values.end());
        v_.resize(v_.size() + pad, canary());
    }
    Guarded(size_t n, T fill) : Guarded(std::vector<T>(n, fill)) {}
    T *data() { return v_.data() + pad; }
    std::vector<T> values() const { return {v_.begin() + pad, v_.end() - pad}; }
    // The canaries intact and, if `unchanged`, the n values as they were (bitwise).
    void check(const char *name, bool unchanged) const {
        const T c = canary();
        for (size_t k = 0; k < pad; k++)
            if (std::memcmp(&v_[k], &c, sizeof(T)) != 0 || std::memcmp(&v_[v_.size() - 1 - k], &c, sizeof(T)) != 0)
                broken(std::string("a canary beside ") + name + " was overwritten");
        if (unchanged && !values_.empty() &&
            std::memcmp(v_.data() + pad, values_.data(), values_.size() * sizeof(T)) != 0)
            broken(std::string(name) + " changed");
    }

private:
    static constexpr size_t pad = 64;
    // A negative quiet NaN, which no kernel writes.
    static T canary() {
        if constexpr (std::is_same_v<T, float>) return -std::numeric_limits<float>::quiet_NaN();
        return T(0xffc1);
    }
    std::vector<T> v_, values_;
};

[[noreturn]] void contract_broken(const gka_ref::Problem &p, const gka_test::Report &r, const char *calls) {
    const gka_shape &s = p.shape;
    broken(std::string("the accuracy contract fails (") + calls + ", " + p.kernel +
           " kernel) on B=" + std::to_string(s.batch) + " T=" + std::to_string(s.seq_len) + " H=" + std::to_string(s.heads) + " D=" + std::to_string(s.head_dim) +
           " window (" + std::to_string(p.window.left) + ", " + std::to_string(p.window.right) +
           "): error / bound y " + std::to_string(r.y.ratio) + " at " + r.y.where + ", lse " +
           std::to_string(r.lse.ratio) + " at " + r.lse.where + ", dx " + std::to_string(r.dx.ratio) + " at " +
           r.dx.where + ", dsigma " + std::to_string(r.dsigma.ratio) + " at " + r.dsigma.where);
}

// gka_score_policy's values by gka_set_score_form's names (families.h's order).
gka_score_policy policy_of(const char *form) {
    for (int k = 0; k < 4; k++)
        if (std::strcmp(form, gka_test::score_forms[k]) == 0) return gka_score_policy(k);
    broken(std::string("unknown score form ") + form);
}

gka_kernel_function kernel_of(const std::string &name) {
    for (size_t k = 0; k < std::size(gka::kernel_function_names); k++)
        if (name == gka::kernel_function_names[k]) return gka_kernel_function(k);
    broken("unknown kernel " + name);
}

struct Call {
    gka_ref::Problem p;
    Guarded<float> x, sigma, dy, y, lse, dx, dsigma;
    // Through the older calls (which run the thread's kernel function and the
    // process's score form), or through a description of the problem's.
    bool older;
    explicit Call(const gka_ref::Problem &problem, bool older_calls)
        : p(problem), x(p.x), sigma(p.sigma), dy(p.dy), y(size(p), fill), lse(rows(p), fill), dx(size(p), fill),
          dsigma(p.sigma.size(), fill), older(older_calls) {
        if (gka_set_kernel(p.kernel.c_str()) != GKA_OK) broken("cannot set the kernel " + p.kernel);
    }
    static constexpr float fill = -12345.0f;
    // The shape may claim more than the buffers hold only where validation must refuse it.
    static size_t size(const gka_ref::Problem &p) { return p.x.size(); }
    static size_t rows(const gka_ref::Problem &p) {
        return p.x.size() / size_t(std::max<int64_t>(1, p.shape.head_dim));
    }
    gka_call described(const float *x_arg, const float *sigma_arg, float *y_arg, float *lse_arg) const {
        gka_call c = gka_call_init();
        c.shape = p.shape, c.window = p.window;
        c.kernel = kernel_of(p.kernel), c.scores = policy_of(gka_score_form());
        c.x = x_arg, c.sigma = sigma_arg, c.y = y_arg, c.lse = lse_arg;
        return c;
    }
    gka_status forward(const float *x_arg, const float *sigma_arg, float *y_arg, float *lse_arg) {
        if (older) return gka_forward(p.shape, p.window, x_arg, sigma_arg, y_arg, lse_arg);
        const gka_call c = described(x_arg, sigma_arg, y_arg, lse_arg);
        return gka_run_forward(&c);
    }
    gka_status forward() { return forward(x.data(), sigma.data(), y.data(), lse.data()); }
    gka_status backward(const float *x_arg, const float *sigma_arg, const float *y_arg, const float *lse_arg,
                        const float *dy_arg, float *dx_arg, float *dsigma_arg) {
        if (older) {
            return gka_backward(p.shape, p.window, x_arg, sigma_arg, y_arg, lse_arg, dy_arg, dx_arg, dsigma_arg);
        }
        gka_call c = described(x_arg, sigma_arg, const_cast<float *>(y_arg), const_cast<float *>(lse_arg));
        c.dy = dy_arg, c.dx = dx_arg, c.dsigma = dsigma_arg;
        return gka_run_backward(&c);
    }
    gka_status backward() {
        return backward(x.data(), sigma.data(), y.data(), lse.data(), dy.data(), dx.data(), dsigma.data());
    }
    void check_buffers(bool outputs_untouched) const {
        x.check("x", true);
        sigma.check("sigma", true);
        dy.check("dy", true);
        for (const auto &[buffer, name] : {std::pair{&y, "y"}, {&lse, "lse"}, {&dx, "dx"}, {&dsigma, "dsigma"}})
            buffer->check(name, outputs_untouched);
    }
};

void run_valid(const gka_test::RandomProblem &drawn, bool older) {
    Call call(drawn.p, older);
    if (call.forward() != GKA_OK) broken(std::string("a valid forward failed: ") + gka_last_error());
    if (call.backward() != GKA_OK) broken(std::string("a valid backward failed: ") + gka_last_error());
    call.check_buffers(false);
    gka_test::Report r = gka_test::compare(drawn.p, {call.y.values(), call.lse.values(), call.dx.values(),
                                                     call.dsigma.values()});
    if (gka_test::in_known_gap(drawn, gka_last_kernel())) r.dsigma.ratio = 0;
    if (!r.holds()) contract_broken(drawn.p, r, "float32");
}

// The bfloat16 calls on the problem's values rounded to bfloat16, judged by the
// bfloat16 contract (rounding makes repeats of tokens a hair apart: the known
// gap's inputs).
void run_valid_bf16(gka_test::RandomProblem drawn) {
    gka_ref::Problem &p = drawn.p;
    Guarded<gka_bf16> x(gka_test::to_bf16(p.x)), dy(gka_test::to_bf16(p.dy)), y(p.x.size(), 0), dx(p.x.size(), 0);
    p.x = gka_test::from_bf16(x.values()), p.dy = gka_test::from_bf16(dy.values());
    Guarded<float> sigma(p.sigma), lse(size_t(p.rows()), 0.0f), dsigma(p.sigma.size(), 0.0f);
    gka_call c = gka_call_init();
    c.shape = p.shape, c.window = p.window, c.dtype = GKA_BFLOAT16;
    c.kernel = kernel_of(p.kernel), c.scores = policy_of(gka_score_form());
    c.x = x.data(), c.sigma = sigma.data(), c.y = y.data(), c.lse = lse.data();
    c.dy = dy.data(), c.dx = dx.data(), c.dsigma = dsigma.data();
    if (gka_run_forward(&c) != GKA_OK) broken(std::string("a valid bf16 forward failed: ") + gka_last_error());
    if (gka_run_backward(&c) != GKA_OK) broken(std::string("a valid bf16 backward failed: ") + gka_last_error());
    x.check("x", true), dy.check("dy", true), sigma.check("sigma", true);
    y.check("y", false), dx.check("dx", false), lse.check("lse", false), dsigma.check("dsigma", false);
    gka_test::Report r = gka_test::compare(p, {gka_test::from_bf16(y.values()), lse.values(), gka_test::from_bf16(dx.values()),
                                               dsigma.values()},
                                           {}, gka_test::bfloat16_bounds);
    drawn.repeats = drawn.repeats || gka_test::has_repeated_tokens(p);
    if (gka_test::in_known_gap(drawn, gka_last_kernel())) r.dsigma.ratio = 0;
    if (!r.holds()) contract_broken(p, r, "bfloat16");
}

// Shapes at the validator's edges: head dims to 130 (the d64, d128 and any
// variants), windows of any span up to past T. Sized so the reference stays quick.
gka_test::RandomProblem edge_problem(gka_test::Draws &draw) {
    const int64_t D = draw.uniform(1, 130), T = draw.uniform(1, D > 32 ? 80 : 200);
    const gka_shape shape{draw.uniform(1, 2), T, draw.uniform(1, 3), D};
    const gka_window window{draw.uniform(-1, T + 2), draw.uniform(-1, T + 2)};
    std::vector<float> sigma(shape.heads);
    for (float &s : sigma) s = float(std::sqrt(double(D)) * draw.log_uniform(0.05, 20));
    const double offset = draw.uniform(0, 1) ? 3.0 : 0.0;
    gka_ref::Problem p = gka_test::gaussian_problem(shape, window, sigma, 1.0, offset, draw.bits());
    p.kernel = draw.kernel_function();
    return {p, false};
}

void run_invalid(gka_test::Draws &draw, bool older) {
    gka_ref::Problem p = gka_test::gaussian_problem({draw.uniform(1, 2), draw.uniform(1, 9), draw.uniform(1, 3),
                                                     draw.uniform(1, 9)},
                                                    {draw.uniform(-1, 4), draw.uniform(-1, 4)}, {}, 1.0, 0.0, 1);
    p.sigma.assign(p.shape.heads, 1.0f);
    const float bad_sigmas[] = {0.0f, -1.0f, -0.0f, std::numeric_limits<float>::infinity(),
                                -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()};
    int null_argument = -1;
    gka_status expected = GKA_ERR_INVALID_ARGUMENT;
    switch (draw.uniform(0, 4)) {
    case 0: (&p.shape.batch)[draw.uniform(0, 3)] = -draw.uniform(older ? 0 : 1, 1000); break;
    case 1: (draw.uniform(0, 1) ? p.window.left : p.window.right) = -draw.uniform(2, 1000); break;
    case 2: p.sigma[draw.uniform(0, p.shape.heads - 1)] = bad_sigmas[draw.uniform(0, 5)]; break;
    case 3: null_argument = int(draw.uniform(0, 6)); break;
    default:  // the buffers stay small: validation refuses before any is read
        (&p.shape.batch)[draw.uniform(0, 3)] = draw.uniform(int64_t(1) << 31, std::numeric_limits<int64_t>::max());
        expected = GKA_ERR_UNSUPPORTED;
    }
    Call call(p, older);
    float *pointers[] = {call.x.data(), call.sigma.data(), call.y.data(), call.lse.data(), call.dy.data(),
                         call.dx.data(), call.dsigma.data()};
    // Forward: x, sigma, y, lse; backward: x, sigma, y, lse, dy, dx, dsigma.
    auto arg = [&](int k) { return k == null_argument ? nullptr : pointers[k]; };
    const gka_status forward = call.forward(arg(0), arg(1), arg(2), arg(3));
    const bool forward_refused = forward != GKA_OK && *gka_last_error() != '\0';
    const gka_status backward = call.backward(arg(0), arg(1), arg(2), arg(3), arg(4), arg(5), arg(6));
    const bool backward_refused = backward != GKA_OK && *gka_last_error() != '\0';
    // A NULL backward-only argument (dy, dx, dsigma) leaves the forward valid.
    const bool forward_valid = null_argument >= 4;
    if (forward_valid ? forward != GKA_OK : (forward != expected || !forward_refused))
        broken("the forward answered " + std::to_string(forward) + " to an invalid call, not " +
               std::to_string(expected));
    if (backward != expected || !backward_refused)
        broken("the backward answered " + std::to_string(backward) + " to an invalid call, not " +
               std::to_string(expected));
    call.check_buffers(!forward_valid);
    call.dx.check("dx", true);
    call.dsigma.check("dsigma", true);
}

void run_non_finite(gka_test::Draws &draw, bool older) {
    gka_test::RandomProblem drawn = gka_test::random_problem(draw);
    const float specials[] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                              -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::max()};
    std::vector<float> &target = draw.uniform(0, 1) ? drawn.p.x : drawn.p.dy;
    for (int64_t k = draw.uniform(1, 4); k > 0; k--)
        target[draw.uniform(0, int64_t(target.size()) - 1)] = specials[draw.uniform(0, 3)];
    Call call(drawn.p, older);
    call.forward();
    call.backward();
    call.check_buffers(false);
}

// A description broken in what the older calls do not have (its size, a
// field's value, random features' fields, the batch layout), refused by both
// passes, nothing written.
void run_bad_description(gka_test::Draws &draw) {
    gka_ref::Problem p = gka_test::gaussian_problem({1, draw.uniform(1, 9), draw.uniform(1, 3), draw.uniform(1, 9)},
                                                    {-1, 0}, {}, 1.0, 0.0, 1);
    p.sigma.assign(p.shape.heads, 1.0f);
    Call call(p, false);
    gka_call c = call.described(call.x.data(), call.sigma.data(), call.y.data(), call.lse.data());
    c.dy = call.dy.data(), c.dx = call.dx.data(), c.dsigma = call.dsigma.data();
    struct {
        gka_call known;
        int64_t later;  // a field of a newer gka.h
    } newer{c, draw.uniform(1, std::numeric_limits<int64_t>::max())};
    newer.known.size = sizeof newer;
    const gka_call *given = &c;
    gka_status expected = GKA_ERR_INVALID_ARGUMENT;
    // Any int in an enum field, as a C caller may store (its bits copied: C++
    // may not cast one past the enum's range).
    const int wild = int(draw.uniform(0, 1) ? draw.uniform(4, 1000) : -draw.uniform(1, 1000));
    auto set = [&](auto &field) { std::memcpy(&field, &wild, sizeof wild); };
    const std::vector<float> frequencies(size_t(p.shape.heads * p.shape.head_dim), 1.0f);
    switch (draw.uniform(0, 8)) {
    case 0: set(c.dtype); break;
    case 1: set(c.kernel); break;
    case 2: set(c.scores); break;
    case 3: set(c.device); break;
    // Short of the first version's fields (a caller of that version, size up to
    // the decode cache, gets the later fields' defaults).
    case 4: c.size = size_t(draw.uniform(0, int64_t(offsetof(gka_call, features)) - 1)); break;
    case 5: given = &newer.known, expected = GKA_ERR_UNSUPPORTED; break;
    case 6: c.features = -draw.uniform(1, std::numeric_limits<int64_t>::max()); break;
    case 7: c.frequencies = frequencies.data(); break;  // random features' W, with features = 0
    default: c.cache_capacity = draw.uniform(1, 100);  // decode's field, in a forward and a backward
    }
    const gka_status forward = gka_run_forward(given);
    const bool forward_refused = forward == expected && *gka_last_error() != '\0';
    const gka_status backward = gka_run_backward(given);
    if (!forward_refused || backward != expected || *gka_last_error() == '\0')
        broken("a broken description was answered " + std::to_string(forward) + ", " + std::to_string(backward) +
               ", not " + std::to_string(expected));
    call.check_buffers(true);
}

// A description with a zero dimension: no kernel runs; lse (where only D is 0)
// the log of each row's key count, dsigma 0, and nothing else written (its
// other tensors, without elements, sit between canaries).
void run_zero(gka_test::Draws &draw) {
    gka_shape s{draw.uniform(1, 2), draw.uniform(1, 9), draw.uniform(1, 3), draw.uniform(1, 9)};
    (&s.batch)[draw.uniform(0, 3)] = 0;
    const gka_window w{draw.uniform(-1, 10), draw.uniform(-1, 10)};
    const int64_t rows = s.batch * s.heads * s.seq_len;
    Guarded<float> sigma(size_t(s.heads), 1.0f), lse(size_t(rows), Call::fill), dsigma(size_t(s.heads), Call::fill);
    Guarded<float> none(size_t(0), 0.0f);
    gka_call c = gka_call_init();
    c.shape = s, c.window = w, c.kernel = kernel_of(draw.kernel_function()), c.scores = policy_of(draw.score_form());
    c.sigma = sigma.data(), c.lse = lse.data(), c.dsigma = dsigma.data();
    if (draw.uniform(0, 1)) c.x = none.data(), c.y = none.data(), c.dy = none.data(), c.dx = none.data();
    if (gka_run_forward(&c) != GKA_OK) broken(std::string("a call without elements failed: ") + gka_last_error());
    const std::vector<float> got = lse.values();
    for (int64_t b = 0; b < s.batch; b++)
        for (int64_t h = 0; h < s.heads; h++)
            for (int64_t i = 0; i < s.seq_len; i++) {
                const int64_t first = w.left < 0 ? 0 : std::max<int64_t>(0, i - w.left);
                const int64_t last = w.right < 0 ? s.seq_len - 1 : std::min(s.seq_len - 1, i + w.right);
                const float expected = float(std::log(double(std::max<int64_t>(0, last - first + 1))));
                if (got[size_t((b * s.heads + h) * s.seq_len + i)] != expected)
                    broken("lse of a call with D = 0 is not the log of its row's key count");
            }
    if (gka_run_backward(&c) != GKA_OK) broken(std::string("a call without elements failed: ") + gka_last_error());
    for (float d : dsigma.values())
        if (d != 0.0f) broken("dsigma of a call without elements is not 0");
    sigma.check("sigma", true), none.check("an empty tensor", true);
    lse.check("lse", false), dsigma.check("dsigma", false);
}

// Up to 5 sequences of 0-40 tokens packed; cu_seqlens broken at one entry, or not.
void run_varlen(gka_test::Draws &draw) {
    const int64_t B = draw.uniform(1, 5), H = draw.uniform(1, 3), D = draw.uniform(1, 70);
    std::vector<int64_t> cu{0};
    for (int64_t s = 0; s < B; s++) cu.push_back(cu.back() + draw.uniform(0, 40));
    if (cu.back() == 0) cu.back() = 1;
    const int64_t total = cu.back();
    const gka_window window{draw.uniform(-1, 8), draw.uniform(-1, 2)};
    if (draw.uniform(0, 3) == 0) cu[draw.uniform(0, B)] += draw.uniform(0, 1) ? -draw.uniform(1, 50) : draw.uniform(1, 50);
    std::vector<float> sigma(H);
    for (float &s : sigma) s = float(std::sqrt(double(D)) * draw.log_uniform(0.1, 10));
    gka_ref::Problem packed_problem =
        gka_test::gaussian_problem({1, total, H, D}, window, sigma, 1.0, 0.0, draw.bits());
    packed_problem.kernel = draw.kernel_function();
    Call call(packed_problem, true);
    const gka_shape packed{B, total, H, D};
    const gka_status forward = gka_forward_varlen(packed, cu.data(), window, call.x.data(), call.sigma.data(),
                                                  call.y.data(), call.lse.data());
    const gka_status backward = gka_backward_varlen(packed, cu.data(), window, call.x.data(), call.sigma.data(),
                                                    call.y.data(), call.lse.data(), call.dy.data(), call.dx.data(),
                                                    call.dsigma.data());
    bool refused = cu[0] != 0 || cu[B] != total;  // a change may leave it valid (an interior entry, still in order)
    for (int64_t s = 0; s < B; s++) refused = refused || cu[s + 1] < cu[s];
    if (refused != (forward != GKA_OK) || refused != (backward != GKA_OK))
        broken("varlen answered " + std::to_string(forward) + ", " + std::to_string(backward) + " to " +
               (refused ? "broken" : "valid") + " cu_seqlens");
    call.check_buffers(refused);
    if (refused) return;
    const std::vector<float> x = call.x.values(), y = call.y.values();
    for (int64_t s = 0; s < B; s++) {
        const int64_t length = cu[s + 1] - cu[s], at = cu[s] * H * D;
        if (length == 0) continue;
        std::vector<float> y_alone(length * H * D), lse_alone(length * H);
        if (gka_forward({1, length, H, D}, window, &x[at], sigma.data(), y_alone.data(), lse_alone.data()) != GKA_OK)
            broken(std::string("a sequence's own forward failed: ") + gka_last_error());
        if (std::memcmp(y_alone.data(), &y[at], y_alone.size() * sizeof(float)) != 0)
            broken("varlen's y of sequence " + std::to_string(s) + " differs from its own call's");
    }
}

const std::vector<std::string> &families() {
    static const std::vector<std::string> runnable = gka_test::families_this_host_runs();
    return runnable;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    FuzzedDataProvider bytes(data, size);
    BytesDraws draw(bytes);
    const std::string &family = families()[draw.uniform(0, int64_t(families().size()) - 1)];
    if (gka_set_cpu_family(family.c_str()) != GKA_OK) broken("cannot force family " + family);
    if (gka_set_score_form(draw.score_form()) != GKA_OK) broken("cannot set the score form");
    if (gka_set_num_threads(int(draw.uniform(1, 4))) != GKA_OK) broken("cannot set the thread count");
    const bool older = draw.uniform(0, 3) == 0;  // the older calls, over the description
    switch (draw.uniform(0, 11)) {
    case 0: run_invalid(draw, older); break;
    case 1: run_non_finite(draw, older); break;
    case 2: run_valid(edge_problem(draw), older); break;
    case 3: run_valid_bf16(gka_test::random_problem(draw)); break;
    case 9: run_varlen(draw); break;
    case 10: run_bad_description(draw); break;
    case 11: run_zero(draw); break;
    default: run_valid(gka_test::random_problem(draw), older);
    }
    return 0;
}
