#include "check.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <iterator>
#include <fstream>
#include <sstream>

namespace gka_test {

KernelOf::KernelOf(const gka_ref::Problem &p) { REQUIRE(gka_set_kernel(p.kernel.c_str()) == GKA_OK); }
KernelOf::~KernelOf() { gka_set_kernel(nullptr); }

gka_kernel_function kernel_function(const std::string &name) {
    const auto *names = std::begin(gka::kernel_function_names), *end = std::end(gka::kernel_function_names);
    const auto *found = std::find(names, end, name);
    REQUIRE(found != end);
    return gka_kernel_function(found - names);
}

gka_score_policy process_score_policy() {
    const std::string form = gka_score_form();
    const auto *found = std::find(std::begin(score_forms), std::end(score_forms), form);
    REQUIRE(found != std::end(score_forms));
    return gka_score_policy(found - std::begin(score_forms));
}

gka_call described(const std::string &kernel) {
    gka_call c = gka_call_init();
    c.kernel = kernel_function(kernel), c.scores = process_score_policy();
    return c;
}

gka_call described(const gka_ref::Problem &p) {
    gka_call c = described(p.kernel);
    c.shape = p.shape, c.window = p.window;
    c.x = p.x.data(), c.sigma = p.sigma.data(), c.dy = p.dy.data();
    return c;
}

Outputs run_kernels(const gka_ref::Problem &p, std::string *forward_kernel) {
    Outputs o{std::vector<float>(p.size()), std::vector<float>(p.rows()), std::vector<float>(p.size()),
              std::vector<float>(p.shape.heads)};
    gka_call c = described(p);
    c.y = o.y.data(), c.lse = o.lse.data(), c.dx = o.dx.data(), c.dsigma = o.dsigma.data();
    gka_status s = gka_run_forward(&c);
    INFO(gka_last_error());
    REQUIRE(s == GKA_OK);
    if (forward_kernel) *forward_kernel = gka_last_kernel();
    s = gka_run_backward(&c);
    INFO(gka_last_error());
    REQUIRE(s == GKA_OK);
    return o;
}

void check_report(const std::string &what, const gka_ref::Problem &p, const Report &r) {
    INFO(what << ", " << p.kernel << " kernel, shape B=" << p.shape.batch << " T=" << p.shape.seq_len
              << " H=" << p.shape.heads
              << " D=" << p.shape.head_dim << ", window (" << p.window.left << ", " << p.window.right << ")");
    INFO("worst error / tolerance: y " << r.y.ratio << " at " << r.y.where << "; lse " << r.lse.ratio << " at "
                                       << r.lse.where << "; dx " << r.dx.ratio << " at " << r.dx.where
                                       << "; dsigma " << r.dsigma.ratio << " at " << r.dsigma.where);
    CHECK(r.y.ratio <= 1.0);
    CHECK(r.lse.ratio <= 1.0);
    CHECK(r.dx.ratio <= 1.0);
    CHECK(r.dsigma.ratio <= 1.0);
}

std::string check_problem(const gka_ref::Problem &p) {
    std::string forward_kernel;
    const Outputs out = run_kernels(p, &forward_kernel);
    check_report(std::string("family ") + gka_cpu_family() + ", kernels " + forward_kernel + " and " +
                     gka_last_kernel(),
                 p, compare(p, out));
    return forward_kernel;
}

std::vector<std::string> runnable_families() {
    for (const std::string &f : compiled_families())
        if (!gka_cpu_family_supported(f.c_str())) WARN("SKIP family " << f << ": this host's CPU cannot run it");
    return families_this_host_runs();
}

void for_each_family_and_form(const std::function<void()> &body) {
    // The other kernel functions have the direct form alone, whatever the setting.
    const bool forms = std::string(gka_kernel()) == "gaussian";
    for_each_family([&] {
        if (!forms) return body();
        for (const char *form : score_forms) {
            INFO("score form " << form);
            REQUIRE(gka_set_score_form(form) == GKA_OK);
            body();
        }
    });
    REQUIRE(gka_set_score_form(nullptr) == GKA_OK);
}

void for_each_family(const std::function<void()> &body) {
    for (const std::string &family : runnable_families()) {
        INFO("family " << family);
        REQUIRE(gka_set_cpu_family(family.c_str()) == GKA_OK);
        REQUIRE(std::string(gka_cpu_family()) == family);
        body();
    }
    REQUIRE(gka_set_cpu_family(nullptr) == GKA_OK);
}

void for_each_kernel(const std::function<void(const char *kernel)> &body) {
    for (const char *kernel : gka::kernel_function_names) {
        INFO("kernel " << kernel);
        REQUIRE(gka_set_kernel(kernel) == GKA_OK);
        body(kernel);
    }
    REQUIRE(gka_set_kernel(nullptr) == GKA_OK);
}

namespace {

std::vector<FamilyRow> read_families_table() {
    std::ifstream table(GKA_FAMILIES_TABLE);
    REQUIRE(table.good());
    std::vector<std::string> header;
    std::vector<FamilyRow> rows;
    for (std::string line; std::getline(table, line);) {
        if (line.empty() || line[0] == '#') continue;
        std::vector<std::string> fields;
        std::istringstream in(line);
        for (std::string f; std::getline(in, f, '\t');) fields.push_back(f);
        if (header.empty()) {
            header = fields;
            continue;
        }
        REQUIRE(fields.size() == header.size());
        FamilyRow row;
        for (size_t k = 0; k < fields.size(); k++) row[header[k]] = fields[k];
        rows.push_back(row);
    }
    return rows;
}

}  // namespace

// Read once: the per-family tests ask for rows once a problem.
const std::vector<FamilyRow> &families_table() {
    static const std::vector<FamilyRow> rows = read_families_table();
    return rows;
}

FamilyRow family_row(const std::string &family) {
    for (const FamilyRow &row : families_table())
        if (row.at("family") == family) return row;
    FAIL("family " << family << " is not in " << GKA_FAMILIES_TABLE);
    return {};
}

}  // namespace gka_test
