// The test suite's use of the accuracy contract (contract.h): runs libgka on a
// reference Problem and CHECKs the contract's metric, on every family.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "../generators/kernel_function.h"
#include "contract.h"
#include "families.h"
#include "skip.h"

namespace gka_test {

// The problem's kernel function set (gka_set_kernel) for the scope, the
// Gaussian again after it: a test's calls never leave another kernel set for
// the next test in the same process.
class KernelOf {
public:
    explicit KernelOf(const gka_ref::Problem &p);
    ~KernelOf();
    KernelOf(const KernelOf &) = delete;
    KernelOf &operator=(const KernelOf &) = delete;
};

// gka_call's names for a kernel function (gka::kernel_function_names), and for
// the score policy the process's setting names (for_each_family_and_form sets it).
gka_kernel_function kernel_function(const std::string &name);
gka_score_policy process_score_policy();
// A description on the host (float32) of the kernel function `kernel` under
// process_score_policy(): its fields but the shape, window and tensors.
gka_call described(const std::string &kernel);
// That of `p` (its kernel function), with its shape, window, x, sigma and dy.
gka_call described(const gka_ref::Problem &p);

// Forward then backward (fed the kernel's own y and lse) through gka_run_forward
// and gka_run_backward on the running family, with described(p); the forward's
// variant in *forward_kernel (gka_last_kernel() names the backward's).
Outputs run_kernels(const gka_ref::Problem &p, std::string *forward_kernel = nullptr);

// CHECKs every ratio of `r` <= 1, saying what ran (`what`: the family or device) on which problem.
void check_report(const std::string &what, const gka_ref::Problem &p, const Report &r);
// Runs on the running CPU family, compares, and checks every ratio <= 1;
// returns the forward's variant.
std::string check_problem(const gka_ref::Problem &p);

// The CPU families this host can run (each is tested, not only the default).
std::vector<std::string> runnable_families();

// Runs `body` once per runnable family and score form, forcing each; restores
// the defaults after. Under a kernel function other than the Gaussian (which
// runs the direct form whatever the setting), once per family.
void for_each_family_and_form(const std::function<void()> &body);
// Runs `body` once per runnable family, forcing each; restores the default after.
void for_each_family(const std::function<void()> &body);
// Runs `body(kernel)` once per kernel function (gka_set_kernel's names, the
// Gaussian first), setting each; restores the Gaussian after. The body sets
// its problems' kernel (gka_ref::Problem::kernel) for the reference.
void for_each_kernel(const std::function<void(const char *kernel)> &body);

// cmake/families.tsv's rows (every architecture's), each field by its header's
// column name, read once; family_row(name): one row, which must be there.
using FamilyRow = std::map<std::string, std::string>;
const std::vector<FamilyRow> &families_table();
FamilyRow family_row(const std::string &family);

}  // namespace gka_test
