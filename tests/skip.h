// Reporting a test case Skipped, with its reason, instead of Passed (Catch2 v2
// has no skip). Under CTest, which sets GKA_SKIP_EXIT for every Catch2 test
// (tests/CMakeLists.txt), a run that skipped and failed nothing exits with
// that code, CTest's SKIP_RETURN_CODE, after printing "SKIP: reason"; a run
// with a failed check fails, skipped or not (a case may check what it can
// before it skips the rest), and never with that code. Run by hand, a skip is
// a warning.
#pragma once

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace gka_test {

inline std::string &skip_reason() {
    static std::string reason;
    return reason;
}

// The caller returns after it, or goes on with what it can still check.
inline void skip(const std::string &reason) {
    WARN("SKIP: " << reason);
    skip_reason() = reason;
}

// main's exit status, from Catch's (its count of failed assertions, at most 255).
inline int exit_status(int failures) {
    const char *code = std::getenv("GKA_SKIP_EXIT");
    if (code == nullptr) return failures;
    if (failures != 0) return failures == std::atoi(code) ? 1 : failures;
    if (skip_reason().empty()) return 0;
    std::printf("SKIP: %s\n", skip_reason().c_str());
    return std::atoi(code);
}

}  // namespace gka_test
