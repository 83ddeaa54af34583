// Include this instead of Catch2 directly: it works with Catch2 2.13 and 3.x.
#pragma once
#if GPUWIRE_CATCH_VERSION == 3
#include <catch2/catch_all.hpp>
// Catch2 2.x puts Approx in the global namespace, 3.x only in Catch.
using Catch::Approx;
#else
#include <catch2/catch.hpp>
#endif
