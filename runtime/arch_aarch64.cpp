#include <sys/auxv.h>

#include "arch.h"

namespace gka::arch {
namespace {

// HWCAP bits of Linux's arm64 ABI (asm/hwcap.h), by /proc/cpuinfo's names.
constexpr unsigned long hwcap_fphp = 1ul << 9, hwcap_asimdhp = 1ul << 10, hwcap_asimddp = 1ul << 20,
                        hwcap_sve = 1ul << 22, hwcap2_sve2 = 1ul << 1, hwcap2_i8mm = 1ul << 13,
                        hwcap2_bf16 = 1ul << 14;

// FPCR: FZ (bit 24) flushes denormals; RMode (bits 22-23) 0 is round to
// nearest; IOE..IDE (bits 8-12, 15) trap exceptions. The sticky flags live in
// FPSR, which the kernels' mode leaves alone.
constexpr uint64_t flush_to_zero = 1ull << 24, rounding = 3ull << 22, traps = 0x1full << 8 | 1ull << 15;

}  // namespace

bool host_has(const std::string &feature) {
    const unsigned long hwcap = getauxval(AT_HWCAP), hwcap2 = getauxval(AT_HWCAP2);
    if (feature == "asimd" || feature == "fp") return true;  // every AArch64 Linux host
    if (feature == "fphp") return hwcap & hwcap_fphp;
    if (feature == "asimdhp") return hwcap & hwcap_asimdhp;
    if (feature == "asimddp") return hwcap & hwcap_asimddp;
    if (feature == "sve") return hwcap & hwcap_sve;
    if (feature == "sve2") return hwcap2 & hwcap2_sve2;
    if (feature == "i8mm") return hwcap2 & hwcap2_i8mm;
    if (feature == "bf16") return hwcap2 & hwcap2_bf16;
    return false;
}

uint64_t float_mode() {
    uint64_t fpcr;
    asm volatile("mrs %0, fpcr" : "=r"(fpcr));
    return fpcr;
}
void set_float_mode(uint64_t mode) { asm volatile("msr fpcr, %0" : : "r"(mode)); }
uint64_t kernel_float_mode(uint64_t caller) { return (caller & ~(rounding | traps)) | flush_to_zero; }
uint64_t restored_float_mode(uint64_t caller, uint64_t) { return caller; }

}  // namespace gka::arch
