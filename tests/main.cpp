#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "skip.h"

int main(int argc, char **argv) { return gka_test::exit_status(Catch::Session().run(argc, argv)); }
