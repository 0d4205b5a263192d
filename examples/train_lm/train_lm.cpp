// train_lm: trains a byte-level language model whose attention is GKA through
// libgka (or, with --attention dot, standard dot-product attention) on a text
// file or directory. Prints progress, writes <out>/log.csv and
// <out>/summary.json; with --generate N, then samples N bytes after a prompt
// through GKA's decode path. Run with --help for the options.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <stdexcept>
#include <string>

#include "corpus.h"
#include "model.h"

namespace {

struct Options {
    std::string data = "/usr/share/common-licenses", attention = "gka", dtype = "f32", window = "causal";
    std::string out = "train_lm_out", prompt = "The ", batches = "windows", kernel = "gaussian";
    std::string frequencies = "fixed";
    int generate = 0, features = 0;
    double temperature = 0.8;
    int layers = 4, heads = 2, head_dim = 64, seq = 128, batch = 16, steps = 600;
    int eval_every = 50, eval_batches = 8;
    double lr = 3e-3, validation_fraction = 0.1;
    uint64_t seed = 1;
};

const char *kUsage = R"(usage: train_lm [--option value]...
  --data PATH          text file or directory of files (default /usr/share/common-licenses)
  --attention gka|dot  GKA through libgka, or dot-product attention with W_Q, W_K, W_V (default gka)
  --dtype f32|bf16     GKA's kernels in float32 or bfloat16 (the rest of the model is float32; default f32)
  --kernel NAME        GKA's kernel function: gaussian, laplace or cauchy (gka_call.kernel; default gaussian)
  --window causal|W    causal, or a causal sliding window of W tokens including the query (default causal)
  --features M         random-feature GKA, linear in T: M features a head (docs/random-features.md;
                       float32, Gaussian, causal, windows batches; default 0: exact GKA)
  --frequencies fixed|learned         the features' frequencies: fixed draws (the Gaussian's
                       estimator) or trained with the model (a learned kernel; default fixed)
  --layers N --heads H --head-dim D   model shape (default 4, 2, 64: width 128)
  --seq T --batch B    tokens per sequence and sequences per step (default 128, 16)
  --batches windows|packed            training batches: B windows of T bytes of the stream, or B*T tokens
                       of whole paragraphs (up to T each) packed, each attending within itself
                       (gka_forward_varlen; GKA only; default windows). Validation uses windows,
                       and the FLOPs per token printed are the windows' (an upper bound when packed).
  --steps N --lr LR    optimizer steps and peak AdamW learning rate (default 600, 3e-3)
  --eval-every N --eval-batches K     validation cadence and size (default 50, 8)
  --seed S --out DIR   (default 1, train_lm_out)
  --generate N         after training, sample N bytes through GKA's decode path (gka_decode; default 0)
  --prompt TEXT --temperature T       what the sample continues, and its temperature (0: the likeliest
                       byte each time; default "The ", 0.8); the sample goes to stdout and DIR/sample.txt
)";

Options parse(int argc, char **argv) {
    std::map<std::string, std::string> given;
    for (int k = 1; k < argc; k++) {
        std::string key = argv[k];
        if (key == "--help" || key == "-h") {
            std::fputs(kUsage, stdout);
            std::exit(0);
        }
        if (key.rfind("--", 0) != 0 || k + 1 >= argc) throw std::invalid_argument("bad argument '" + key + "'");
        given[key.substr(2)] = argv[++k];
    }
    Options o;
    auto take = [&](const char *name, auto &field) {
        auto it = given.find(name);
        if (it == given.end()) return;
        if constexpr (std::is_same_v<std::decay_t<decltype(field)>, std::string>) {
            field = it->second;
        } else {
            size_t used = 0;
            field = std::decay_t<decltype(field)>(std::stod(it->second, &used));
            if (used != it->second.size()) throw std::invalid_argument("--" + it->first + ": not a number");
        }
        given.erase(it);
    };
    take("data", o.data), take("attention", o.attention), take("dtype", o.dtype), take("window", o.window);
    take("out", o.out);
    take("layers", o.layers), take("heads", o.heads), take("head-dim", o.head_dim), take("seq", o.seq);
    take("batch", o.batch), take("steps", o.steps), take("eval-every", o.eval_every);
    take("eval-batches", o.eval_batches), take("lr", o.lr), take("seed", o.seed);
    take("generate", o.generate), take("prompt", o.prompt), take("temperature", o.temperature);
    take("batches", o.batches), take("kernel", o.kernel), take("features", o.features);
    take("frequencies", o.frequencies);
    if (!given.empty()) throw std::invalid_argument("unknown option --" + given.begin()->first);
    if (o.generate < 0 || o.temperature < 0) throw std::invalid_argument("--generate and --temperature must be >= 0");
    if (o.batches != "windows" && o.batches != "packed") {
        throw std::invalid_argument("--batches must be windows or packed, not '" + o.batches + "'");
    }
    if (o.batches == "packed" && o.attention != "gka") {
        throw std::invalid_argument("--batches packed runs GKA's varlen kernels: it needs --attention gka");
    }
    if (o.generate > 0 && o.attention != "gka") {
        throw std::invalid_argument("--generate samples through GKA's decode path: it needs --attention gka");
    }
    if (o.frequencies != "fixed" && o.frequencies != "learned") {
        throw std::invalid_argument("--frequencies must be fixed or learned, not '" + o.frequencies + "'");
    }
    if (o.features > 0 && o.window != "causal") {
        throw std::invalid_argument("--features runs random-feature GKA under the causal window (a sliding window is "
                                    "exact GKA in O(T*W) already)");
    }
    return o;
}

gka_window parse_window(const std::string &w) {
    if (w == "causal") return {-1, 0};
    const int tokens = std::stoi(w);
    if (tokens < 1) throw std::invalid_argument("--window: a window has at least one token");
    return {tokens - 1, 0};
}

// Linear warm-up over the first 5% of the steps, then a cosine decay to 10%.
double learning_rate(const Options &o, int step) {
    const int warmup = std::max(1, o.steps / 20);
    if (step < warmup) return o.lr * (step + 1) / warmup;
    const double progress = double(step - warmup) / std::max(1, o.steps - warmup);
    return o.lr * (0.1 + 0.9 * 0.5 * (1 + std::cos(M_PI * progress)));
}

double evaluate(lm::Model &model, const std::vector<uint8_t> &text, const Options &o, const lm::AttentionShape &shape) {
    double sum = 0;
    for (int k = 0; k < o.eval_batches; k++) {
        lm::Batch batch = lm::evaluation_batch(text, o.batch, o.seq, k, o.eval_batches);
        sum += model.forward(batch.inputs.data(), batch.targets.data(), shape);
    }
    return sum / o.eval_batches;
}

std::string sigmas(lm::Model &model) {
    std::string out = "[";
    for (lm::Block &block : model.blocks) {
        auto *gka = dynamic_cast<lm::GkaAttention *>(block.attention.get());
        if (gka == nullptr) continue;
        for (float log_sigma : gka->log_sigma.value) out += (out.size() > 1 ? ", " : "") + std::to_string(std::exp(log_sigma));
    }
    return out + "]";
}

// A byte drawn from softmax(logits / temperature); the likeliest at temperature 0.
uint8_t sample(const float *logits, double temperature, std::mt19937_64 &rng) {
    const float *top = std::max_element(logits, logits + lm::kVocab);
    if (temperature == 0) return uint8_t(top - logits);
    std::vector<double> weights(lm::kVocab);
    for (int k = 0; k < lm::kVocab; k++) weights[k] = std::exp((logits[k] - *top) / temperature);
    return uint8_t(std::discrete_distribution<int>(weights.begin(), weights.end())(rng));
}

// The prompt, then o.generate sampled bytes, one token a step through each
// block's decode cache: the whole text under causal attention, a ring of W-1
// slots under a sliding window of W.
std::string generate(lm::Model &model, const Options &o, gka_window window) {
    std::string text = o.prompt.empty() ? "\n" : o.prompt;
    const int64_t length = int64_t(text.size()) + o.generate;
    const int64_t capacity = window.left < 0 ? length : std::max<int64_t>(1, window.left);
    std::mt19937_64 rng(o.seed);
    const float *logits = nullptr;
    for (size_t p = 0; p < text.size(); p++) logits = model.decode(uint8_t(text[p]), int64_t(p), window, capacity);
    for (int n = 0; n < o.generate; n++) {
        text.push_back(char(sample(logits, o.temperature, rng)));
        logits = model.decode(uint8_t(text.back()), int64_t(text.size()) - 1, window, capacity);
    }
    return text;
}

int run(const Options &o) {
    const lm::Corpus corpus = lm::Corpus::load(o.data, o.validation_fraction);
    lm::ModelConfig config;
    config.attention = o.attention, config.dtype = o.dtype, config.kernel = o.kernel, config.layers = o.layers;
    config.features = {o.features, o.frequencies == "learned"};
    config.heads = o.heads;
    config.head_dim = o.head_dim;
    lm::Model model(config, o.seed);
    const lm::AttentionShape shape{o.batch, o.seq, o.heads, o.head_dim, parse_window(o.window)};
    const std::vector<lm::Param *> params = model.params();
    lm::AdamW optimizer;
    std::mt19937_64 rng(o.seed);

    std::filesystem::create_directories(o.out);
    std::ofstream log(o.out + "/log.csv");
    log << "step,train_loss,val_loss,lr,tokens_per_s,elapsed_s\n";
    const std::string features =
        o.features ? ", " + std::to_string(o.features) + " random features (" + o.frequencies + ")" : "";
    std::printf("train_lm: %s attention (%s, %s kernel%s), %d layers, width %d (%d heads x %d), window (%lld, %lld), "
                "%zu parameters (%zu in attention), %.3g training FLOPs/token (%.3g in attention)\n",
                o.attention.c_str(), o.dtype.c_str(), o.kernel.c_str(), features.c_str(), o.layers, config.dim(),
                o.heads, o.head_dim,
                (long long)shape.window.left,
                (long long)shape.window.right, model.parameter_count(), model.attention_parameter_count(),
                model.training_flops_per_token(shape), model.attention_training_flops_per_token(shape));
    std::printf("train_lm: %s: %zu training bytes, %zu validation bytes; libgka family %s, %d threads\n",
                o.data.c_str(), corpus.train.size(), corpus.validation.size(), gka_cpu_family(), gka_num_threads());

    const lm::Packer packer(corpus.train);  // --batches packed's paragraphs
    using clock = std::chrono::steady_clock;
    double train_seconds = 0, interval_loss = 0, tokens_per_s = 0, final_train = 0, final_val = 0;
    int interval_steps = 0;
    for (int step = 0; step <= o.steps; step++) {
        if (step % o.eval_every == 0 || step == o.steps) {
            final_train = evaluate(model, corpus.train, o, shape);
            final_val = evaluate(model, corpus.validation, o, shape);
            const double shown = interval_steps ? interval_loss / interval_steps : final_train;
            std::printf("step %5d/%d  train %.4f (eval %.4f)  val %.4f  %.0f tokens/s  sigma %s\n", step, o.steps,
                        shown, final_train, final_val, tokens_per_s, sigmas(model).c_str());
            std::fflush(stdout);
            log << step << "," << final_train << "," << final_val << "," << learning_rate(o, step) << ","
                << tokens_per_s << "," << train_seconds << "\n";
            interval_loss = 0, interval_steps = 0;
        }
        if (step == o.steps) break;
        const auto start = clock::now();
        // The batch outlives the backward: the layers keep pointers to its bytes.
        lm::PackedBatch batch;
        lm::AttentionShape step_shape = shape;
        if (o.batches == "packed") {
            batch = packer.batch(o.batch, o.seq, rng);
            step_shape.batch = 1, step_shape.seq = o.batch * o.seq, step_shape.cu_seqlens = batch.cu_seqlens;
        } else {
            static_cast<lm::Batch &>(batch) = lm::random_batch(corpus.train, o.batch, o.seq, rng);
        }
        model.zero_grad();
        interval_loss += model.forward(batch.inputs.data(), batch.targets.data(), step_shape);
        interval_steps++;
        model.backward();
        lm::clip_grad_norm(params, 1.0);
        optimizer.step(params, float(learning_rate(o, step)));
        const double seconds = std::chrono::duration<double>(clock::now() - start).count();
        train_seconds += seconds;
        tokens_per_s = double(o.batch) * o.seq * (step + 1) / train_seconds;
    }

    std::ofstream summary(o.out + "/summary.json");
    summary << "{\n  \"attention\": \"" << o.attention << "\", \"kernel\": \"" << o.kernel << "\", \"dtype\": \""
            << o.dtype << "\", \"features\": " << o.features << ", \"frequencies\": \"" << o.frequencies
            << "\", \"batches\": \""
            << o.batches << "\", \"layers\": " << o.layers << ", \"heads\": " << o.heads
            << ", \"head_dim\": " << o.head_dim << ", \"seq\": " << o.seq << ", \"batch\": " << o.batch
            << ", \"steps\": " << o.steps << ",\n  \"window\": [" << shape.window.left << ", " << shape.window.right
            << "], \"parameters\": " << model.parameter_count()
            << ", \"attention_parameters\": " << model.attention_parameter_count()
            << ",\n  \"training_flops_per_token\": " << model.training_flops_per_token(shape)
            << ", \"attention_training_flops_per_token\": " << model.attention_training_flops_per_token(shape)
            << ",\n  \"final_train_loss\": " << final_train << ", \"final_val_loss\": " << final_val
            << ", \"tokens_per_s\": " << tokens_per_s << ", \"train_seconds\": " << train_seconds
            << ",\n  \"sigma\": " << sigmas(model) << ", \"cpu_family\": \"" << gka_cpu_family() << "\"\n}\n";
    std::printf("train_lm: final train %.4f, val %.4f (gap %+.4f), %.0f tokens/s; wrote %s/log.csv, %s/summary.json\n",
                final_train, final_val, final_val - final_train, tokens_per_s, o.out.c_str(), o.out.c_str());
    if (o.generate > 0) {
        const auto start = clock::now();
        const std::string text = generate(model, o, shape.window);
        const double seconds = std::chrono::duration<double>(clock::now() - start).count();
        std::ofstream(o.out + "/sample.txt", std::ios::binary) << text;
        std::printf("train_lm: sample (temperature %g, %d bytes in %.2f s, %s):\n%s\n", o.temperature, o.generate,
                    seconds, gka_last_kernel(), text.c_str());
    }
    return 0;
}

}  // namespace

int main(int argc, char **argv) {
    try {
        return run(parse(argc, argv));
    } catch (const std::exception &e) {
        std::fprintf(stderr, "train_lm: %s\n", e.what());
        return 1;
    }
}
