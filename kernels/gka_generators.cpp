// The GKA generators: inputs, outputs, layout, and each kernel's algorithm
// (generators/) paired with its target's schedule (schedules/). Shapes come
// from the buffers at run time (any B, T, H, D >= 1); the window is a
// run-time input.
#include <iterator>
#include <vector>

#include "../schedules/schedules.h"

namespace {

using namespace Halide;

// Tells Halide the dense C-contiguous [B][T][H][D] layout the runtime always
// passes, so addressing needs no stride parameters.
template<typename Buf>
void dense_features(Buf &buf, const Expr &head_dim, const Expr &heads, const Expr &seq_len, const Expr &batch) {
    buf.dim(0).set_bounds(0, head_dim).set_stride(1);
    buf.dim(1).set_bounds(0, heads).set_stride(head_dim);
    buf.dim(2).set_bounds(0, seq_len).set_stride(head_dim * heads);
    buf.dim(3).set_bounds(0, batch).set_stride(head_dim * heads * seq_len);
}

// The shape Halide's autoschedulers plan for (autotune/ compares them with the
// project's schedules): B=1, T=4096, H=8, causal; D is the head dim compiled for.
constexpr int estimate_batch = 1, estimate_seq_len = 4096, estimate_heads = 8, estimate_head_dim = 64;

template<typename Buf>
void estimate_features(Buf &buf, int head_dim) {
    buf.set_estimates({{0, head_dim}, {0, estimate_heads}, {0, estimate_seq_len}, {0, estimate_batch}});
}
template<typename Buf>
void estimate_rows(Buf &buf) {
    buf.set_estimates({{0, estimate_seq_len}, {0, estimate_heads}, {0, estimate_batch}});
}

// What both generators estimate alike: the bandwidths and a causal window.
template<typename Sigma, typename Span>
void estimate_heads_and_window(Sigma &sigma, Span &left, Span &right) {
    sigma.set_estimates({{0, estimate_heads}});
    left.set_estimate(-1);
    right.set_estimate(0);
}

template<typename Buf>
void dense_per_head(Buf &buf, const Expr &heads, const Expr &batch) {
    buf.dim(0).set_bounds(0, heads).set_stride(1);
    buf.dim(1).set_bounds(0, batch).set_stride(heads);
}

// The generators' `scores` parameter takes score_form.h's names.
const std::map<std::string, gka::ScoreForm> score_forms = [] {
    std::map<std::string, gka::ScoreForm> forms;
    for (int k = 0; k < int(std::size(gka::score_form_names)); k++) forms[gka::score_form_names[k]] = gka::ScoreForm(k);
    return forms;
}();

// The generators' `kernel_function` parameter takes kernel_function.h's names.
const std::map<std::string, gka::KernelFunction> kernel_functions = [] {
    std::map<std::string, gka::KernelFunction> functions;
    for (int k = 0; k < int(std::size(gka::kernel_function_names)); k++) {
        functions[gka::kernel_function_names[k]] = gka::KernelFunction(k);
    }
    return functions;
}();

template<typename Buf>
void dense_rows(Buf &buf, const Expr &heads, const Expr &seq_len, const Expr &batch) {
    buf.dim(0).set_bounds(0, seq_len).set_stride(1);
    buf.dim(1).set_bounds(0, heads).set_stride(seq_len);
    buf.dim(2).set_bounds(0, batch).set_stride(seq_len * heads);
}

// W, [H][M][D] float32: (d, m, h).
template<typename Buf>
void dense_frequencies(Buf &buf, const Expr &head_dim, const Expr &features, const Expr &heads) {
    buf.dim(0).set_bounds(0, head_dim).set_stride(1);
    buf.dim(1).set_bounds(0, features).set_stride(head_dim);
    buf.dim(2).set_bounds(0, heads).set_stride(head_dim * features);
}

// The backward's tensors may be a slice of the call's heads (the runtime runs a
// backward a few heads at a time, runtime/cpu_attention.cpp, so that its
// working buffers are a few heads' size): the dims within a head are dense as
// the caller's, the dims past the heads a run-time stride apart. (The strides
// are run-time values either way: the heads' count is.)
template<typename Buf>
void head_slice(Buf &buf, const std::vector<Expr> &extents, int dense_dims) {
    for (int k = 0; k < int(extents.size()); k++) buf.dim(k).set_bounds(0, extents[k]);
    buf.dim(0).set_stride(1);
    if (dense_dims > 1) buf.dim(1).set_stride(extents[0]);
}

// What both generators take alike: overrides of the schedule's default knobs,
// "name:value,..." (the build passes the row of schedules/tuned.tsv, if any); a
// head dim fixed at compile time (constant loops, no edge guards; 0 = any);
// how the scores form |x_i - x_j|^2 (gka::ScoreForm); the kernel that weighs
// the pairs (gka::KernelFunction); and the features' element
// type (x, y, dy and dx: float32, or bfloat16, computed in float32 all the same).
// The feature tensors' type is a parameter, so each generator adds its inputs and
// outputs in configure(), in the order of its function's arguments. `chunk`:
// the forward and backward of a chunk (gka.h, gka_forward_chunk): queries
// against keys of their own, `shift` placing the queries among the keys.
template<class G>
class GkaGenerator : public Generator<G> {
public:
    GeneratorParam<std::string> knobs{"knobs", ""};
    GeneratorParam<int> fixed_head_dim{"head_dim", 0};
    GeneratorParam<gka::ScoreForm> form{"scores", gka::ScoreForm::centred, score_forms};
    GeneratorParam<gka::KernelFunction> function{"kernel_function", gka::KernelFunction::gaussian, kernel_functions};
    GeneratorParam<Type> element{"element", Float(32)};
    GeneratorParam<bool> chunk{"chunk", false};
    // bfloat16 features: products in bfloat16 where exact or within the
    // contract (gka_forward.h, gka_backward.h); the build sets it where
    // cmake/families.tsv's row says the target has bfloat16 dot products.
    GeneratorParam<bool> bf16_products{"bf16_products", false};

protected:
    // (d, h, t, b) in the element type
    GeneratorInput<Buffer<>> *add_features(const std::string &name) {
        return this->template add_input<Buffer<>>(name, element, 4);
    }
    GeneratorOutput<Buffer<void, 4>> *add_feature_output(const std::string &name) {
        return this->template add_output<Buffer<void, 4>>(name, Type(element));
    }
    // A chunk's mask: seq_len queries at key positions shift onwards, against key_len keys.
    gka::Mask chunk_mask(Expr left, Expr right, Expr seq_len, Expr key_len, Expr shift, int band) const {
        return gka::Mask(left, right, seq_len, key_len, shift, seq_len + key_len + Halide::abs(shift), band);
    }
    // A chunk's keys as many as its queries, just before them.
    template<typename Buf, typename Shift>
    void estimate_chunk(Buf &keys, Shift &shift) const {
        estimate_features(keys, estimated_head_dim());
        shift.set_estimate(estimate_seq_len);
    }
    Expr head_dim_of(GeneratorInput<Buffer<>> &x) const {
        return fixed_head_dim > 0 ? Expr(int(fixed_head_dim)) : x.dim(0).extent();
    }
    int estimated_head_dim() const { return fixed_head_dim > 0 ? int(fixed_head_dim) : estimate_head_dim; }
    // Random-feature GKA's states (d <= D, m, h, b), float32 [B][H][M][D + 1].
    GeneratorInput<Buffer<float, 4>> *add_state(const std::string &name) {
        return this->template add_input<Buffer<float, 4>>(name);
    }
    GeneratorOutput<Buffer<float, 4>> *add_state_output(const std::string &name) {
        return this->template add_output<Buffer<float, 4>>(name);
    }
};

// A state of a slice of the call's heads (runtime/cpu_random_features.cpp).
template<typename Buf>
void state_slice(Buf &buf, const Expr &head_dim, const Expr &features, const Expr &heads, const Expr &batch) {
    head_slice(buf, {head_dim + 1, features, heads, batch}, 2);
}

class GkaForward : public GkaGenerator<GkaForward> {
public:
    Input<Buffer<>> *x;                 // (d, h, t, b)
    Input<Buffer<>> *keys = nullptr;    // a chunk's (d, h, t, b)
    Input<Buffer<float, 1>> *sigma;     // (h)
    Input<int32_t> *shift = nullptr;    // a chunk's: query 0's key position
    Input<int32_t> *left, *right;       // FlashAttention's window, -1 = unbounded
    Output<Buffer<void, 4>> *y;         // (d, h, t, b)
    Output<Buffer<float, 3>> *lse;      // (t, h, b)
    Output<Buffer<float, 2>> *spread;   // max_t |x_t - centre|^2   (h, b)

    void configure() {
        x = add_features("x");
        if (chunk) keys = add_features("keys");
        sigma = add_input<Buffer<float, 1>>("sigma");
        if (chunk) shift = add_input<int32_t>("shift");
        left = add_input<int32_t>("left");
        right = add_input<int32_t>("right");
        y = add_feature_output("y");
        lse = add_output<Buffer<float, 3>>("lse");
        spread = add_output<Buffer<float, 2>>("spread");
    }

    void generate() {
        const Expr head_dim = head_dim_of(*x), heads = x->dim(1).extent();
        const Expr seq_len = x->dim(2).extent(), batch = x->dim(3).extent();

        const gka::ForwardSchedule schedule(get_target(), knobs);
        gka::ForwardPipeline p;
        const Expr key_len = chunk ? keys->dim(2).extent() : seq_len;
        const gka::Mask mask = chunk ? chunk_mask(*left, *right, seq_len, key_len, *shift, schedule.band())
                                     : gka::Mask(*left, *right, seq_len, schedule.band());
        gka::define_forward(p, *x, chunk ? Func(*keys) : Func(), *sigma, head_dim, mask, schedule.key_tile(), form, *y,
                            *lse, *spread, bf16_products, function);
        if (using_autoscheduler()) {
            estimate_features(*x, estimated_head_dim());
            estimate_features(*y, estimated_head_dim());
            if (chunk) estimate_chunk(*keys, *shift);
            estimate_rows(*lse);
            estimate_heads_and_window(*sigma, *left, *right);
            spread->set_estimates({{0, estimate_heads}, {0, estimate_batch}});
        } else {
            schedule.apply(p);
        }

        dense_features(*x, head_dim, heads, seq_len, batch);
        if (chunk) dense_features(*keys, head_dim, heads, key_len, batch);
        dense_features(*y, head_dim, heads, seq_len, batch);
        dense_rows(*lse, heads, seq_len, batch);
        dense_per_head(*spread, heads, batch);
        sigma->dim(0).set_bounds(0, heads);
    }
};

class GkaBackward : public GkaGenerator<GkaBackward> {
public:
    Input<Buffer<>> *x, *y, *dy;        // x, the forward's y, dL/dy: (d, h, t, b)
    Input<Buffer<>> *keys = nullptr;    // a chunk's (d, h, t, b)
    Input<Buffer<float, 1>> *sigma;     // (h)
    Input<Buffer<float, 3>> *lse;       // the forward's (t, h, b)
    Input<int32_t> *shift = nullptr;    // a chunk's: query 0's key position
    Input<int32_t> *left, *right;
    Output<Buffer<void, 4>> *dx;        // (d, h, t, b)
    Output<Buffer<void, 4>> *dx_keys = nullptr;  // a chunk's keys' (d, h, t, b)
    Output<Buffer<float, 1>> *dsigma;   // (h)
    Output<Buffer<float, 2>> *spread;   // max_t |x_t - centre|^2   (h, b)

    void configure() {
        x = add_features("x");
        if (chunk) keys = add_features("keys");
        sigma = add_input<Buffer<float, 1>>("sigma");
        y = add_features("y");
        lse = add_input<Buffer<float, 3>>("lse");
        dy = add_features("dy");
        if (chunk) shift = add_input<int32_t>("shift");
        left = add_input<int32_t>("left");
        right = add_input<int32_t>("right");
        dx = add_feature_output("dx");
        if (chunk) dx_keys = add_feature_output("dx_keys");
        dsigma = add_output<Buffer<float, 1>>("dsigma");
        spread = add_output<Buffer<float, 2>>("spread");
    }

    void generate() {
        const Expr head_dim = head_dim_of(*x), heads = x->dim(1).extent();
        const Expr seq_len = x->dim(2).extent(), batch = x->dim(3).extent();

        const gka::BackwardSchedule schedule(get_target(), knobs);
        const Expr key_len = chunk ? keys->dim(2).extent() : seq_len;
        const gka::Mask mask = chunk ? chunk_mask(*left, *right, seq_len, key_len, *shift, schedule.band())
                                     : gka::Mask(*left, *right, seq_len, schedule.band());
        gka::BackwardPipeline two_passes;
        gka::FusedBackwardPipeline one_pass;
        if (schedule.two_pass()) {
            gka::define_backward(two_passes, *x, chunk ? Func(*keys) : Func(), *sigma, *y, *lse, *dy, head_dim, batch,
                                 mask, schedule.key_block(), schedule.query_block(), form, *dx,
                                 chunk ? Func(*dx_keys) : Func(), *dsigma, *spread, function);
        } else {
            gka::define_backward_fused(one_pass, *x, chunk ? Func(*keys) : Func(), *sigma, *y, *lse, *dy, head_dim,
                                       batch, mask, schedule.key_block(), schedule.query_block(),
                                       schedule.groups(heads * batch, mask.key_bands()),
                                       schedule.block_pairs(head_dim), form, *dx,
                                       chunk ? Func(*dx_keys) : Func(), *dsigma, *spread, function, bf16_products);
        }
        if (using_autoscheduler()) {
            for (auto *buf : {x, y, dy}) estimate_features(*buf, estimated_head_dim());
            estimate_features(*dx, estimated_head_dim());
            if (chunk) estimate_chunk(*keys, *shift), estimate_features(*dx_keys, estimated_head_dim());
            estimate_rows(*lse);
            estimate_heads_and_window(*sigma, *left, *right);
            dsigma->set_estimates({{0, estimate_heads}});
            spread->set_estimates({{0, estimate_heads}, {0, estimate_batch}});
        } else if (schedule.two_pass()) {
            schedule.apply(two_passes);
        } else {
            schedule.apply(one_pass);
        }

        for (auto *buf : {x, y, dy}) head_slice(*buf, {head_dim, heads, seq_len, batch}, 2);
        head_slice(*dx, {head_dim, heads, seq_len, batch}, 2);
        if (chunk) {
            dense_features(*keys, head_dim, heads, key_len, batch);
            dense_features(*dx_keys, head_dim, heads, key_len, batch);
        }
        head_slice(*lse, {seq_len, heads, batch}, 2);
        sigma->dim(0).set_bounds(0, heads);
        dsigma->dim(0).set_bounds(0, heads);
        head_slice(*spread, {heads, batch}, 1);
    }
};

// Decode: a few new tokens a sequence against a cache of the features before
// them (generators/gka_decode.h). The direct score form alone.
class GkaDecode : public GkaGenerator<GkaDecode> {
public:
    Input<Buffer<>> *x;                    // the new tokens' features (d, h, q, b)
    Input<Buffer<>> *cache;                // (d, h, slot, b)
    Input<Buffer<int32_t, 1>> *lengths;    // tokens before the new ones (b)
    Input<Buffer<float, 1>> *sigma;        // (h)
    Input<int32_t> *left;                  // the window's left span, -1 = unbounded (the right is 0)
    Output<Buffer<void, 4>> *y;            // (d, h, q, b)
    Output<Buffer<float, 3>> *lse;         // (q, h, b)

    void configure() {
        x = add_features("x");
        cache = add_features("cache");
        lengths = add_input<Buffer<int32_t, 1>>("lengths");
        sigma = add_input<Buffer<float, 1>>("sigma");
        left = add_input<int32_t>("left");
        y = add_feature_output("y");
        lse = add_output<Buffer<float, 3>>("lse");
    }

    void generate() {
        if (form != gka::ScoreForm::direct) throw std::invalid_argument("gka_decode: scores=direct only");
        const Expr head_dim = head_dim_of(*x), heads = x->dim(1).extent();
        const Expr new_tokens = x->dim(2).extent(), batch = x->dim(3).extent(), capacity = cache->dim(2).extent();

        const gka::DecodeSchedule schedule(get_target(), knobs);
        gka::DecodePipeline p;
        gka::define_decode(p, *x, *cache, *lengths, *sigma, *left, head_dim, new_tokens, capacity, schedule.chunk(),
                           *y, *lse, function);
        schedule.apply(p);

        dense_features(*x, head_dim, heads, new_tokens, batch);
        dense_features(*cache, head_dim, heads, capacity, batch);
        dense_features(*y, head_dim, heads, new_tokens, batch);
        dense_rows(*lse, heads, new_tokens, batch);
        lengths->dim(0).set_bounds(0, batch);
        sigma->dim(0).set_bounds(0, heads);
    }
};

// Random-feature GKA (generators/gka_random_features.h): x against M
// features a head, W (d, m, h) float32; `causal` 1 for the window (-1, 0), 0
// for (-1, -1). Any head dim and feature count, the Gaussian alone. A call is
// a segment of its sequences: the states (add_state) carry the tokens outside it.
class GkaRandomFeatureStates : public GkaGenerator<GkaRandomFeatureStates> {
public:
    Input<Buffer<>> *x;                      // (d, h, t, b)
    Input<Buffer<float, 1>> *sigma;          // (h)
    Input<Buffer<float, 3>> *frequencies;    // (d, m, h)
    Input<Buffer<float, 4>> *state_in;
    Output<Buffer<float, 4>> *state_out;

    void configure() {
        x = add_features("x");
        sigma = add_input<Buffer<float, 1>>("sigma");
        frequencies = add_input<Buffer<float, 3>>("frequencies");
        state_in = add_state("state_in");
        state_out = add_state_output("state_out");
    }

    void generate() {
        const Expr head_dim = head_dim_of(*x), heads = x->dim(1).extent();
        const Expr seq_len = x->dim(2).extent(), batch = x->dim(3).extent(), features = frequencies->dim(1).extent();
        const gka::RandomFeatureSchedule schedule(get_target(), knobs);
        gka::RandomFeatureStatesPipeline p;
        gka::define_random_feature_states(p, *x, *sigma, *frequencies, *state_in, head_dim, features, seq_len,
                                          schedule.chunk(), *state_out);
        schedule.apply(p);
        head_slice(*x, {head_dim, heads, seq_len, batch}, 2);
        state_slice(*state_in, head_dim, features, heads, batch);
        state_slice(*state_out, head_dim, features, heads, batch);
        sigma->dim(0).set_bounds(0, heads);
        dense_frequencies(*frequencies, head_dim, features, heads);
    }
};

class GkaRandomFeatureForward : public GkaGenerator<GkaRandomFeatureForward> {
public:
    Input<Buffer<>> *x;                      // (d, h, t, b)
    Input<Buffer<float, 1>> *sigma;          // (h)
    Input<Buffer<float, 3>> *frequencies;    // (d, m, h)
    Input<Buffer<float, 4>> *state_in;       // the keys' before the segment
    Input<int32_t> *causal;
    Output<Buffer<void, 4>> *y;              // (d, h, t, b)
    Output<Buffer<float, 3>> *lse;           // (t, h, b)
    Output<Buffer<float, 4>> *state_out;     // the keys' after it

    void configure() {
        x = add_features("x");
        sigma = add_input<Buffer<float, 1>>("sigma");
        frequencies = add_input<Buffer<float, 3>>("frequencies");
        state_in = add_state("state_in");
        causal = add_input<int32_t>("causal");
        y = add_feature_output("y");
        lse = add_output<Buffer<float, 3>>("lse");
        state_out = add_state_output("state_out");
    }

    void generate() {
        const Expr head_dim = head_dim_of(*x), heads = x->dim(1).extent();
        const Expr seq_len = x->dim(2).extent(), batch = x->dim(3).extent(), features = frequencies->dim(1).extent();
        const gka::RandomFeatureSchedule schedule(get_target(), knobs);
        gka::RandomFeaturePipeline p;
        gka::define_random_feature_forward(p, *x, *sigma, *frequencies, *state_in, head_dim, features, seq_len,
                                           *causal, schedule.chunk(), *y, *lse, *state_out);
        schedule.apply(p);
        head_slice(*x, {head_dim, heads, seq_len, batch}, 2);
        head_slice(*y, {head_dim, heads, seq_len, batch}, 2);
        head_slice(*lse, {seq_len, heads, batch}, 1);  // a segment of its rows: strided
        state_slice(*state_in, head_dim, features, heads, batch);
        state_slice(*state_out, head_dim, features, heads, batch);
        sigma->dim(0).set_bounds(0, heads);
        dense_frequencies(*frequencies, head_dim, features, heads);
    }
};

class GkaRandomFeatureBackward : public GkaGenerator<GkaRandomFeatureBackward> {
public:
    Input<Buffer<>> *x, *y, *dy;             // (d, h, t, b)
    Input<Buffer<float, 1>> *sigma;          // (h)
    Input<Buffer<float, 3>> *frequencies;    // (d, m, h)
    Input<Buffer<float, 4>> *state_in;       // the keys' before the segment
    Input<Buffer<float, 3>> *lse;            // the forward's (t, h, b)
    Input<Buffer<float, 4>> *query_state_in;  // the queries' after the segment
    Input<int32_t> *causal;
    Output<Buffer<void, 4>> *dx;             // (d, h, t, b)
    Output<Buffer<float, 3>> *dfrequencies;  // (d, m, h)
    Output<Buffer<float, 1>> *dsigma;        // (h)
    Output<Buffer<float, 4>> *query_state_out;  // the queries' from the segment on

    void configure() {
        x = add_features("x");
        sigma = add_input<Buffer<float, 1>>("sigma");
        frequencies = add_input<Buffer<float, 3>>("frequencies");
        state_in = add_state("state_in");
        y = add_features("y");
        lse = add_input<Buffer<float, 3>>("lse");
        dy = add_features("dy");
        query_state_in = add_state("query_state_in");
        causal = add_input<int32_t>("causal");
        dx = add_feature_output("dx");
        dfrequencies = add_output<Buffer<float, 3>>("dfrequencies");
        dsigma = add_output<Buffer<float, 1>>("dsigma");
        query_state_out = add_state_output("query_state_out");
    }

    void generate() {
        const Expr head_dim = head_dim_of(*x), heads = x->dim(1).extent();
        const Expr seq_len = x->dim(2).extent(), batch = x->dim(3).extent(), features = frequencies->dim(1).extent();
        const gka::RandomFeatureSchedule schedule(get_target(), knobs);
        gka::RandomFeatureBackwardPipeline p;
        gka::define_random_feature_backward(p, *x, *sigma, *frequencies, *state_in, *y, *lse, *dy, *query_state_in,
                                            head_dim, features, seq_len, batch, *causal, schedule.chunk(), *dx,
                                            *dfrequencies, *dsigma, *query_state_out);
        schedule.apply(p);
        for (auto *buf : {x, y, dy}) head_slice(*buf, {head_dim, heads, seq_len, batch}, 2);
        head_slice(*dx, {head_dim, heads, seq_len, batch}, 2);
        head_slice(*lse, {seq_len, heads, batch}, 1);  // a segment of its rows: strided
        for (auto *buf : {state_in, query_state_in}) state_slice(*buf, head_dim, features, heads, batch);
        state_slice(*query_state_out, head_dim, features, heads, batch);
        sigma->dim(0).set_bounds(0, heads);
        dsigma->dim(0).set_bounds(0, heads);
        dense_frequencies(*frequencies, head_dim, features, heads);
        dense_frequencies(*dfrequencies, head_dim, features, heads);
    }
};

}  // namespace

HALIDE_REGISTER_GENERATOR(GkaForward, gka_forward)
HALIDE_REGISTER_GENERATOR(GkaBackward, gka_backward)
HALIDE_REGISTER_GENERATOR(GkaDecode, gka_decode)
HALIDE_REGISTER_GENERATOR(GkaRandomFeatureStates, gka_rf_states)
HALIDE_REGISTER_GENERATOR(GkaRandomFeatureForward, gka_rf_forward)
HALIDE_REGISTER_GENERATOR(GkaRandomFeatureBackward, gka_rf_backward)
