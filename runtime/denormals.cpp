#include "denormals.h"

#include <xmmintrin.h>

#include "HalideRuntime.h"

namespace gka {
namespace {

// MXCSR: the kernels' mode is the default one (round to nearest, every
// exception masked) with both flushes, whatever the caller's; the sticky
// exception flags are left as the kernels raised them.
constexpr unsigned default_mode = 0x1f80, flush_to_zero = 0x8000, denormals_are_zero = 0x0040,
                   exception_flags = 0x003f;

int do_task_flushing_denormals(void *user_context, halide_task_t task, int index, uint8_t *closure) {
    DenormalsFlushed flushed;
    return halide_default_do_task(user_context, task, index, closure);
}
// The tasks of parallel loops that Halide runs as loop tasks (async schedules).
int do_loop_task_flushing_denormals(void *user_context, halide_loop_task_t task, int min, int extent,
                                    uint8_t *closure, void *task_parent) {
    DenormalsFlushed flushed;
    return halide_default_do_loop_task(user_context, task, min, extent, closure, task_parent);
}

}  // namespace

DenormalsFlushed::DenormalsFlushed() : saved_mode_(_mm_getcsr()) {
    _mm_setcsr(default_mode | flush_to_zero | denormals_are_zero | (saved_mode_ & exception_flags));
}

DenormalsFlushed::~DenormalsFlushed() { _mm_setcsr((saved_mode_ & ~exception_flags) | (_mm_getcsr() & exception_flags)); }

void install_denormal_flushing() {
    halide_set_custom_do_task(do_task_flushing_denormals);
    halide_set_custom_do_loop_task(do_loop_task_flushing_denormals);
}

}  // namespace gka
