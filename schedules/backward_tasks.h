// The CPU backward's tasks, which libgka reads too (no Halide here): a kernel
// runs one task per key-band group, head and batch entry, with key-band
// groups enough for min_tasks of them (BackwardSchedule::groups), so that the
// results follow the shape alone. libgka runs a backward a slice of
// heads at a time (runtime/cpu_attention.cpp) of at least min_tasks tasks:
// its runs' groups are then the whole call's, and so are its results.
#pragma once

namespace gka {

constexpr int default_backward_min_tasks = 2;  // the knob's default (backward_cpu.cpp)

}  // namespace gka
