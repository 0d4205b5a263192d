#include "denormals.h"

#include <xmmintrin.h>

#include "HalideRuntime.h"

namespace gka {
namespace {

// MXCSR bits: the two modes set, and the sticky exception flags, which are
// left as the kernels raised them.
constexpr unsigned flush_to_zero = 0x8000, denormals_are_zero = 0x0040, exception_flags = 0x003f;

int do_task_flushing_denormals(void *user_context, halide_task_t task, int index, uint8_t *closure) {
    DenormalsFlushed flushed;
    return halide_default_do_task(user_context, task, index, closure);
}

}  // namespace

DenormalsFlushed::DenormalsFlushed() : saved_mode_(_mm_getcsr()) {
    _mm_setcsr(saved_mode_ | flush_to_zero | denormals_are_zero);
}

DenormalsFlushed::~DenormalsFlushed() { _mm_setcsr((saved_mode_ & ~exception_flags) | (_mm_getcsr() & exception_flags)); }

void install_denormal_flushing() { halide_set_custom_do_task(do_task_flushing_denormals); }

}  // namespace gka
