// Answers the autotuner's questions about a generator's knobs with the
// generators' own code, so that each constraint is written once: in the
// schedule (schedules/) or the algorithm (generators/) that has it.
//
//   gka_knobs GENERATOR target=T [param=value...]          the default knobs
//   gka_knobs GENERATOR target=T [param=value...] --space  the autotuner's search
//       space, from the schedule's knob table (JSON: schedules/knobs.h)
//   gka_knobs GENERATOR target=T [param=value...] --check  for each knob set read
//       from stdin, a line each ("name:value,..."): "ok" or why not, a line each
// (params: the generator's, as the build passes them: head_dim=64 scores=direct)
//
// A check runs the generator's generate(), the algorithm and its schedule,
// without lowering or compiling: a few milliseconds.
#include <iostream>
#include <map>
#include <string>

#include "Halide.h"
#include "../schedules/schedules.h"

namespace {

using Halide::Internal::GeneratorRegistry;

int usage() {
    std::cerr << "usage: gka_knobs gka_forward|gka_backward target=T [param=value...] [--space|--check]\n";
    return 2;
}

std::string first_line(const std::string &s) { return s.substr(0, s.find('\n')); }

}  // namespace

int main(int argc, char **argv) {
    if (argc < 3) return usage();
    const std::string generator = argv[1];
    std::map<std::string, std::string> params;
    std::string ask;  // "", --space or --check
    for (int i = 2; i < argc; i++) {
        const std::string arg = argv[i];
        const auto eq = arg.find('=');
        if ((arg == "--check" || arg == "--space") && ask.empty()) {
            ask = arg;
        } else if (eq != std::string::npos && arg.substr(0, eq) != "knobs") {
            params[arg.substr(0, eq)] = arg.substr(eq + 1);
        } else {
            return usage();
        }
    }
    if (!params.count("target") || (generator != "gka_forward" && generator != "gka_backward")) return usage();
    try {
        const Halide::Target target(params["target"]);
        if (ask != "--check") {
            const bool forward = generator == "gka_forward";
            const std::string answer =
                ask == "--space" ? (forward ? gka::ForwardSchedule(target, "").search_space()
                                            : gka::BackwardSchedule(target, "").search_space())
                                 : (forward ? gka::ForwardSchedule(target, "").knobs()
                                            : gka::BackwardSchedule(target, "").knobs());
            std::cout << answer << "\n";
            return 0;
        }
        for (std::string knobs; std::getline(std::cin, knobs);) {
            auto g = GeneratorRegistry::create(generator, Halide::GeneratorContext(target));
            for (const auto &[name, value] : params) {
                if (name != "target") g->set_generatorparam_value(name, value);
            }
            g->set_generatorparam_value("knobs", knobs);
            try {
                g->build_pipeline();
                std::cout << "ok" << std::endl;
            } catch (const std::exception &e) {
                std::cout << first_line(e.what()) << std::endl;
            }
        }
    } catch (const std::exception &e) {
        std::cerr << "gka_knobs: " << e.what() << "\n";
        return 1;
    }
    return 0;
}
