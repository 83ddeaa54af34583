// The release check that keeps a component out of an Open MPI it was not
// built for.
#include "gw_catch.hpp"

#include <cstring>
#include <string>

#include "gpuwire/ompi_version.h"

TEST_CASE("the library version string is parsed", "[version]")
{
    int a = -1, b = -1, c = -1;
    REQUIRE(gw_parse_ompi_version("Open MPI v4.1.4, package: Debian OpenMPI, ident: 4.1.4", &a,
                                  &b, &c) == 0);
    CHECK((a == 4 && b == 1 && c == 4));
    REQUIRE(gw_parse_ompi_version("Open MPI v5.0.7rc1, package: Open MPI", &a, &b, &c) == 0);
    CHECK((a == 5 && b == 0 && c == 7));
    CHECK(gw_parse_ompi_version("MPICH Version: 4.1", &a, &b, &c) != 0);
    CHECK(gw_parse_ompi_version("Open MPI vX", &a, &b, &c) != 0);
    CHECK(gw_parse_ompi_version(nullptr, &a, &b, &c) != 0);
}

TEST_CASE("only the same major.minor is accepted, and a refusal names both", "[version]")
{
    char why[320] = "";
    CHECK(gw_version_compare(4, 1, 4, "Open MPI v4.1.6, package", "pml", why, sizeof(why)) == 0);
    CHECK(gw_version_compare(4, 1, 4, "Open MPI v5.0.7, package", "pml", why, sizeof(why)) == -1);
    std::string s(why);
    CHECK(s.find("4.1.4") != std::string::npos);
    CHECK(s.find("5.0.7") != std::string::npos);
    CHECK(s.find('\n') == std::string::npos);
    CHECK(gw_version_compare(5, 0, 7, "Open MPI v4.1.4", "coll", why, sizeof(why)) == -1);
    CHECK(gw_version_compare(4, 1, 4, "garbage", "pml", why, sizeof(why)) == -1);
    CHECK(std::string(why).find("cannot tell") != std::string::npos);
}

TEST_CASE("version numbers are plain decimals that fit an int", "[version]")
{
    int a = -1, b = -1, c = -1;
    CHECK(gw_parse_ompi_version("Open MPI v-4.1.4", &a, &b, &c) != 0);
    CHECK(gw_parse_ompi_version("Open MPI v4.+1.4", &a, &b, &c) != 0);
    CHECK(gw_parse_ompi_version("Open MPI v 4.1.4", &a, &b, &c) != 0);
    CHECK(gw_parse_ompi_version("Open MPI v99999999999.1.2", &a, &b, &c) != 0);
    CHECK((a == -1 && b == -1 && c == -1));
    REQUIRE(gw_parse_ompi_version("Open MPI v4.1.-2", &a, &b, &c) == 0);
    CHECK((a == 4 && b == 1 && c == 0));
}
