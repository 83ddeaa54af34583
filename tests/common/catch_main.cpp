// Catch2 2.x and 3.x both build the tests: 2.x needs this translation unit to
// provide main(), 3.x gets main() from Catch2WithMain.
#if GPUWIRE_CATCH_VERSION == 2
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
#endif
