// The Open MPI gpuwire was built for, the one found at run time, and where
// Open MPI would find the component.
//
// The run-time library is dlopen-ed (libmpi.so.40, the soname of Open MPI 4.x
// and 5.x) and asked MPI_Get_library_version, which MPI allows before
// MPI_Init. The verdict is the component's own (gw_version_compare), so the
// tool refuses exactly what the component would refuse.
#include <dlfcn.h>
#include <link.h>
#include <sys/stat.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "gpuwire/ompi_version.h"
#include "probes.hpp"

#ifndef GW_INFO_OMPI_MAJOR
#error "GW_INFO_OMPI_MAJOR/MINOR/RELEASE come from the build (mpi.h of the Open MPI built for)"
#endif

namespace gpuwire::info {
namespace {

constexpr const char* kComponentFile = "mca_pml_gpuwire.so";

bool is_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string user_component_dir() {
  const char* home = std::getenv("HOME");
  return home && *home ? std::string(home) + "/.openmpi/components" : std::string();
}

// Open MPI's component search path: OMPI_MCA_mca_base_component_path when
// set (its USER_DEFAULT and SYS_DEFAULT words expanded), else its own folder
// then ~/.openmpi/components.
std::vector<std::string> component_search_path(std::string& source) {
  const std::string sys = GW_INFO_OMPI_COMPONENT_DIR;
  const std::string user = user_component_dir();
  std::vector<std::string> dirs;
  const char* env = std::getenv("OMPI_MCA_mca_base_component_path");
  if (!env) {
    source = "default";
    dirs.push_back(sys);
    if (!user.empty()) dirs.push_back(user);
    return dirs;
  }
  source = "OMPI_MCA_mca_base_component_path";
  std::string list = env;
  size_t start = 0;
  while (start <= list.size()) {
    size_t end = list.find(':', start);
    if (end == std::string::npos) end = list.size();
    std::string dir = list.substr(start, end - start);
    if (dir == "SYS_DEFAULT") dir = sys;
    if (dir == "USER_DEFAULT") dir = user;
    if (!dir.empty()) dirs.push_back(dir);
    start = end + 1;
  }
  return dirs;
}

}  // namespace

MpiReport probe_mpi() {
  MpiReport r;
  r.built_major = GW_INFO_OMPI_MAJOR;
  r.built_minor = GW_INFO_OMPI_MINOR;
  r.built_release = GW_INFO_OMPI_RELEASE;
  r.built_for = std::to_string(r.built_major) + "." + std::to_string(r.built_minor) + "." +
                std::to_string(r.built_release);

  r.component_dirs = component_search_path(r.component_path_source);
  for (const std::string& dir : r.component_dirs) {
    if (is_file(dir + "/" + kComponentFile)) {
      r.component_path = dir + "/" + kComponentFile;
      break;
    }
  }

  void* h = dlopen("libmpi.so.40", RTLD_LAZY | RTLD_LOCAL);
  if (!h) {
    const char* e = dlerror();
    r.load_error = e ? e : "dlopen failed";
    r.mismatch = "no Open MPI library (libmpi.so.40) could be loaded: " + r.load_error;
    return r;
  }
  r.found = true;
  struct link_map* lm = nullptr;
  if (dlinfo(h, RTLD_DI_LINKMAP, &lm) == 0 && lm && lm->l_name) r.library = lm->l_name;

  using GetVersion = int (*)(char*, int*);
  auto get_version = reinterpret_cast<GetVersion>(dlsym(h, "MPI_Get_library_version"));
  // Never dlclose: Open MPI's libraries do not expect to be unloaded.
  if (!get_version) {
    r.mismatch = "libmpi.so.40 has no MPI_Get_library_version";
    return r;
  }
  // MPI_MAX_LIBRARY_VERSION_STRING is 256 in Open MPI; leave room for others.
  char text[8192] = "";
  int len = 0;
  if (get_version(text, &len) != 0) {
    r.mismatch = "MPI_Get_library_version failed";
    return r;
  }
  // Open MPI counts the terminating NUL in len: take the string up to it.
  text[sizeof text - 1] = '\0';
  std::string full(text, std::strlen(text));
  (void)len;
  r.library_version = full.substr(0, full.find('\n'));
  int major = 0, minor = 0, release = 0;
  if (gw_parse_ompi_version(full.c_str(), &major, &minor, &release) == 0) {
    r.running = std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(release);
  }
  char why[320] = "";
  r.match = gw_version_compare(r.built_major, r.built_minor, r.built_release, full.c_str(), "pml",
                               why, sizeof why) == 0;
  if (!r.match) r.mismatch = why;
  return r;
}

}  // namespace gpuwire::info
