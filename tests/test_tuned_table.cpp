// schedules/tuned.tsv round-trips through the build: for a shape, libgka picks
// the variant of the narrowest shape class in the table that contains it,
// compiled with that row's knobs (the schedule's defaults where no row
// matches), and that variant is the one that runs. The table is read as the
// build resolved it; autotune/tuned_table.py's own test checks the resolving.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "check.h"
#include "gka/gka.h"
#include "kernel_variants.h"

namespace {

using gka::ShapeClass;
using gka::WindowKind;

struct Row {
    std::string family, kernel;
    ShapeClass shape;
    std::string knobs;
};

WindowKind window_named(const std::string &name) {
    return name == "global" ? WindowKind::GLOBAL : name == "sliding" ? WindowKind::SLIDING : WindowKind::ANY;
}

// The tuned table as the build resolved it (autotune/tuned_table.py): knobs_from
// applied, each class as numbers (head_dim 0 any, max_seq_len 0 no bound), empty
// knobs the schedule's defaults.
std::vector<Row> read_table() {
    std::ifstream table(GKA_TUNED_RESOLVED);
    REQUIRE(table.good());
    std::vector<Row> rows;
    for (std::string line; std::getline(table, line);) {
        if (line.empty() || line[0] == '#') continue;
        std::istringstream in(line);
        Row r;
        std::string window;
        REQUIRE(in >> r.family >> r.kernel >> r.shape.head_dim >> window >> r.shape.min_seq_len >> r.shape.max_seq_len);
        r.shape.window = window_named(window);
        in >> r.knobs;  // none: the schedule's defaults
        rows.push_back(r);
    }
    REQUIRE(!rows.empty());
    return rows;
}

// The row whose knobs a call gets: the narrowest containing one of the rows of
// the kernel it runs, whose head dim is `kernel_head_dim` (0: the kernel of
// any head dim; a row sets its own kernel's knobs alone), if any.
const Row *narrowest_row(const std::vector<Row> &rows, const std::string &family, const std::string &kernel,
                         int64_t kernel_head_dim, WindowKind kind, int64_t seq_len) {
    const Row *best = nullptr;
    for (const Row &r : rows) {
        if (r.family != family || r.kernel != kernel || r.shape.head_dim != kernel_head_dim ||
            !r.shape.contains(kernel_head_dim, kind, seq_len)) {
            continue;
        }
        if (!best || r.shape.narrowness() > best->shape.narrowness()) best = &r;
    }
    return best;
}

// The head dim of the kernel `name` (a call's of `head_dim`): its own where the
// build compiles one (gka_forward_avx512_d64_...), else 0, the kernel of any.
int64_t kernel_head_dim(const std::string &name, int64_t head_dim) {
    const std::string own = "_d" + std::to_string(head_dim);
    const size_t at = name.find(own);
    const size_t end = at + own.size();
    return at != std::string::npos && (end == name.size() || name[end] == '_') ? head_dim : 0;
}

// The shortest probe shape (length >= 64, causal or a window of 8) whose
// narrowest row is `row`; seq_len 0 when narrower rows take every probe.
std::pair<int64_t, gka_window> probe_shape(const std::vector<Row> &rows, const Row &row, int64_t head_dim,
                                           const std::vector<int64_t> &sorted_lengths) {
    for (int64_t t : sorted_lengths) {
        if (t < 64) continue;
        for (const gka_window w : {gka_window{-1, 0}, gka_window{8, 0}})
            if (narrowest_row(rows, row.family, row.kernel, row.shape.head_dim, gka::window_kind(w.left, w.right, t),
                              t) == &row)
                return {t, w};
    }
    return {0, {}};
}

std::string expected_knobs(const std::vector<Row> &rows, const std::string &family, const std::string &kernel,
                           int64_t kernel_head_dim, WindowKind kind, int64_t seq_len) {
    const Row *row = narrowest_row(rows, family, kernel, kernel_head_dim, kind, seq_len);
    return row ? row->knobs : "";
}

}  // namespace

TEST_CASE("window kinds: sliding only when both sides bound the keys", "[tuned]") {
    CHECK(gka::window_kind(-1, -1, 4096) == WindowKind::GLOBAL);
    CHECK(gka::window_kind(-1, 0, 4096) == WindowKind::GLOBAL);
    CHECK(gka::window_kind(255, -1, 4096) == WindowKind::GLOBAL);
    CHECK(gka::window_kind(255, 0, 4096) == WindowKind::SLIDING);
    CHECK(gka::window_kind(16, 16, 4096) == WindowKind::SLIDING);
    CHECK(gka::window_kind(255, 0, 256) == WindowKind::GLOBAL);  // the window spans the sequence: causal
    CHECK(gka::window_kind(254, 0, 256) == WindowKind::SLIDING);
}

TEST_CASE("shape classes: containment and narrowness", "[tuned]") {
    const ShapeClass any{0, WindowKind::ANY, 1, 0}, d64{64, WindowKind::ANY, 1, 0},
        sliding{64, WindowKind::SLIDING, 1, 0}, short_any{64, WindowKind::ANY, 1, 2048},
        short_global{64, WindowKind::GLOBAL, 1, 2048};
    CHECK(any.contains(96, WindowKind::SLIDING, 100000));
    CHECK(!d64.contains(128, WindowKind::GLOBAL, 64));
    CHECK(sliding.contains(64, WindowKind::SLIDING, 16384));
    CHECK(!sliding.contains(64, WindowKind::GLOBAL, 16384));
    CHECK(short_global.contains(64, WindowKind::GLOBAL, 2048));
    CHECK(!short_global.contains(64, WindowKind::GLOBAL, 2049));
    CHECK(any.narrowness() < d64.narrowness());
    CHECK(d64.narrowness() < short_any.narrowness());
    CHECK(short_any.narrowness() < sliding.narrowness());  // a window kind outranks a length range
    CHECK(sliding.narrowness() < short_global.narrowness());
}

TEST_CASE("the tuned table is what the build compiled, and the variant it picks is what runs", "[tuned]") {
    const std::vector<Row> rows = read_table();
    // Probe lengths: each row's bounds and their neighbours, and common lengths.
    std::vector<int64_t> lengths = {64, 1024, 4096, 16384};
    for (const Row &r : rows) {
        for (int64_t t : {r.shape.min_seq_len - 1, r.shape.min_seq_len, r.shape.max_seq_len, r.shape.max_seq_len + 1})
            if (t >= 2) lengths.push_back(t);
    }
    const gka_window windows[] = {{-1, -1}, {-1, 0}, {16, 0}, {255, 0}};
    std::vector<std::string> families = gka_test::compiled_families();
    for (const std::string &f : gka_test::cuda_families()) families.push_back(f);
    // The forward's expansion about the origin takes the expansion's knobs.
    auto kernel_of = [](const std::string &pass) { return "gka_" + pass.substr(0, pass.find("_origin")); };
    for (const std::string &family : families)
        for (const std::string pass : {"forward", "forward_origin", "backward"})
            for (int64_t head_dim : {64, 96, 128})
                for (int64_t seq_len : lengths)
                    for (const gka_window &w : windows) {
                        const gka_shape shape{1, seq_len, 8, head_dim};
                        const WindowKind kind = gka::window_kind(w.left, w.right, seq_len);
                        const char *knobs = nullptr;
                        const char *name = gka_kernel_variant(family.c_str(), pass.c_str(), shape, w, &knobs);
                        INFO(family << " " << pass << " D=" << head_dim << " T=" << seq_len << " window (" << w.left
                                    << ", " << w.right << ")");
                        REQUIRE(name != nullptr);
                        CHECK(std::string(name).rfind(kernel_of(pass) + "_" + family + "_", 0) == 0);
                        CHECK(std::string(knobs) == expected_knobs(rows, family, kernel_of(pass),
                                                                   kernel_head_dim(name, head_dim), kind, seq_len));
                    }
    CHECK(gka_kernel_variant("avx512", "sideways", {1, 64, 1, 64}, {-1, 0}, nullptr) == nullptr);
    CHECK(gka_kernel_variant("sse2", "forward", {1, 64, 1, 64}, {-1, 0}, nullptr) == nullptr);

    // Each row's variant is the one that runs for the shortest probe shape the
    // row decides (no narrower row contains it), on the families this host
    // runs, and agrees with the reference there (the centred expansion: the
    // variant the row names; the origin's, of the same knobs, is the first
    // test's).
    std::sort(lengths.begin(), lengths.end());
    std::string not_run, not_built;  // the rows of families this host cannot run, or this build left out
    const std::vector<std::string> cuda = gka_test::cuda_families(), cpu = gka_test::compiled_families();
    for (const Row &r : rows) {
        if (std::count(cuda.begin(), cuda.end(), r.family)) continue;  // its kernels run in gka.cuda, on a GPU
        if (!std::count(cpu.begin(), cpu.end(), r.family)) {
            if (not_built.find(" " + r.family) == std::string::npos) not_built += " " + r.family;
            continue;
        }
        if (!gka_cpu_family_supported(r.family.c_str())) {
            not_run += " " + r.family + "/" + r.kernel + "/" + std::to_string(r.shape.head_dim);
            continue;
        }
        const int64_t head_dim = r.shape.head_dim ? r.shape.head_dim : 32;
        const auto [seq_len, w] = probe_shape(rows, r, head_dim, lengths);
        INFO(r.family << " " << r.kernel << ": no probe shape reaches this row; a narrower row shadows it");
        REQUIRE(seq_len > 0);
        const std::string pass = r.kernel.substr(4);
        const char *knobs = nullptr;
        const std::string name = gka_kernel_variant(r.family.c_str(), pass.c_str(), {1, seq_len, 1, head_dim}, w, &knobs);
        INFO(r.family << " " << r.kernel << " " << name);
        CHECK(std::string(knobs) == r.knobs);
        REQUIRE(gka_set_cpu_family(r.family.c_str()) == GKA_OK);
        REQUIRE(gka_set_score_form("centred") == GKA_OK);
        const auto p = gka_ref::make_problem({1, seq_len, 1, head_dim}, w, {1.2f}, 1.5, seq_len);
        std::string forward;
        const gka_test::Outputs out = gka_test::run_kernels(p, &forward);
        CHECK(name == (pass == "forward" ? forward : std::string(gka_last_kernel())));
        gka_test::check_report(r.family + " " + name, p, gka_test::compare(p, out));
        if (pass == "forward") {  // and its variant about the origin, on features near it (sigma 2 sqrt(D))
            REQUIRE(gka_set_score_form("auto") == GKA_OK);
            const auto near = gka_ref::make_problem({1, seq_len, 1, head_dim}, w,
                                                    {2.0f * std::sqrt(float(head_dim))}, 1.5, seq_len);
            const gka_test::Outputs near_out = gka_test::run_kernels(near, &forward);
            CHECK(forward ==
                  gka_kernel_variant(r.family.c_str(), "forward_origin", {1, seq_len, 1, head_dim}, w, nullptr));
            gka_test::check_report(r.family + " " + forward, near, gka_test::compare(near, near_out));
        }
        REQUIRE(gka_set_cpu_family(nullptr) == GKA_OK);
        REQUIRE(gka_set_score_form(nullptr) == GKA_OK);
    }
    if (!not_built.empty()) WARN("rows of families this build did not compile (FAMILIES=all does):" << not_built);
    if (!not_run.empty()) gka_test::skip("rows of families this host cannot run, not run:" + not_run);
}
