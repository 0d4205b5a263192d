#include "denormals.h"

#include "HalideRuntime.h"
#include "arch.h"

namespace gka {
namespace {

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

DenormalsFlushed::DenormalsFlushed() : saved_mode_(arch::float_mode()) {
    arch::set_float_mode(arch::kernel_float_mode(saved_mode_));
}

DenormalsFlushed::~DenormalsFlushed() {
    arch::set_float_mode(arch::restored_float_mode(saved_mode_, arch::float_mode()));
}

void install_denormal_flushing() {
    halide_set_custom_do_task(do_task_flushing_denormals);
    halide_set_custom_do_loop_task(do_loop_task_flushing_denormals);
}

}  // namespace gka
