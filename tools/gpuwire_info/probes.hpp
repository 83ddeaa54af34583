// The probes of gpuwire-info. Each fills one part of the Report and never
// fails: what cannot be found is recorded with its reason. Libraries that may
// be absent at run time (libcuda, libnvidia-ml, libmpi) are dlopen-ed, never
// linked, so the tool runs on any machine the component runs on.
//
// Order matters only for probe_paths(), which reads the UCX report.
#pragma once

#include <string>

#include "report.hpp"

namespace gpuwire::info {

GpuReport probe_gpus();
MpiReport probe_mpi();
UcxReport probe_ucx();
FabricReport probe_fabric_view();
PathReport probe_paths(const UcxReport& ucx);
SelectReport probe_select(int gpus);

void render_text(const Report& report, bool verbose, std::string& out);
void render_json(const Report& report, std::string& out);

}  // namespace gpuwire::info
