// runtime/arch.h on the architecture it is built for (tests/CMakeLists.txt
// runs it natively, and cross-compiled for AArch64 under qemu-user): the
// kernels' float mode flushes denormals and the caller's mode comes back (with
// any exception flags raised meanwhile, where the mode holds them); a
// feature every host of the architecture has is found, an unknown one is not.
// Usage: gka_arch_check BASELINE_FEATURE
#include <cstdio>

#include "arch.h"

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    using namespace gka::arch;
    volatile float tiny = 1e-30f, scale = 1e-10f;  // their product, 1e-40, is denormal
    const uint64_t caller = float_mode();
    set_float_mode(kernel_float_mode(caller));
    const float flushed = tiny * scale;
    set_float_mode(restored_float_mode(caller, float_mode()));
    const float kept = tiny * scale;
    const bool restored = restored_float_mode(caller, caller) == caller;  // nothing raised: exactly the caller's
    const bool ok = flushed == 0.0f && kept != 0.0f && restored && host_has(argv[1]) && !host_has("no_such_feature");
    std::printf("%s: in the kernels' mode 1e-30 * 1e-10 = %g, in the caller's %g; mode restored %d; has %s %d\n",
                ok ? "ok" : "FAIL", flushed, kept, restored, argv[1], host_has(argv[1]));
    return ok ? 0 : 1;
}
