// gpuwire-info: what gpuwire sees on this machine and what it will do.
//
//   gpuwire-info            human-readable report
//   gpuwire-info --json     the same as one JSON object, for scripts
//   gpuwire-info --verbose  also the engine's own start-up lines
//
// Run it where the application runs (same environment, same node): the UCX
// settings (UCX_TLS, ...) and pml_gpuwire_* settings (OMPI_MCA_pml_gpuwire_*)
// of the environment are applied, as they would be under mpirun.
// Exit status: 0 when the report was written, 2 on a bad argument. What the
// probed libraries print themselves goes to stderr.
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "probes.hpp"

namespace {

void usage(FILE* f) {
  std::fputs(
      "usage: gpuwire-info [--json] [--verbose]\n"
      "  Prints the GPUs and their links, the Open MPI gpuwire was built for and the one\n"
      "  found at run time, UCX and its transports, the RDMA devices, and the paths\n"
      "  gpuwire will take here, and coll gpuwire's selection table with the rows that\n"
      "  apply to this machine. Settings come from the environment as under mpirun\n"
      "  (UCX_*, OMPI_MCA_pml_gpuwire_*, OMPI_MCA_coll_gpuwire_select_file).\n"
      "  --json     one JSON object instead of text\n"
      "  --verbose  also print what the engine logs while starting\n",
      f);
}

}  // namespace

int main(int argc, char** argv) {
  bool json = false, verbose = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--json")) {
      json = true;
    } else if (!std::strcmp(argv[i], "--verbose") || !std::strcmp(argv[i], "-v")) {
      verbose = true;
    } else if (!std::strcmp(argv[i], "--help") || !std::strcmp(argv[i], "-h")) {
      usage(stdout);
      return 0;
    } else if (!std::strcmp(argv[i], "--version")) {
      std::printf("gpuwire-info %s\n", GW_INFO_GPUWIRE_VERSION);
      return 0;
    } else {
      std::fprintf(stderr, "gpuwire-info: unknown argument '%s'\n", argv[i]);
      usage(stderr);
      return 2;
    }
  }

  // The libraries probed print to stdout themselves (UCX logs there by
  // default, set up before main): while they run, stdout goes to stderr, so
  // that stdout carries the report alone (--json output stays valid JSON).
  std::fflush(stdout);
  const int report_fd = dup(STDOUT_FILENO);
  if (report_fd >= 0) dup2(STDERR_FILENO, STDOUT_FILENO);

  using namespace gpuwire::info;
  Report r;
  r.gpuwire_version = GW_INFO_GPUWIRE_VERSION;
  r.gpus = probe_gpus();
  r.mpi = probe_mpi();
  r.ucx = probe_ucx();
  r.fabric = probe_fabric_view();
  r.paths = probe_paths(r.ucx);
  r.select = probe_select(r.gpus.count);

  std::fflush(stdout);
  if (report_fd >= 0) {
    dup2(report_fd, STDOUT_FILENO);
    close(report_fd);
  }
  std::string out;
  if (json) render_json(r, out);
  else render_text(r, verbose, out);
  std::fwrite(out.data(), 1, out.size(), stdout);
  return std::fflush(stdout) == 0 ? 0 : 1;
}
