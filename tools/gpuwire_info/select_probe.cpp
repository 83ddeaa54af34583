// The selection table of coll gpuwire as the component would load it here:
// the shipped table, or the file OMPI_MCA_coll_gpuwire_select_file names
// (a malformed one: its one-line error, and the shipped table, as in the
// component), and which rows apply to this machine (one node, the GPUs the
// probe counted). Which rank count applies is the job's: rows are marked
// for every rank count on this node.
#include <cstdlib>

#include "gpuwire/coll_select.h"
#include "probes.hpp"

namespace gpuwire::info {

SelectReport probe_select(int gpus) {
  SelectReport s;
  gw::SelTable t;
  char err[512] = "";
  if (gw_sel_load_shipped(t.get(), err, sizeof(err)) != 0) s.error = err;
  const char* file = std::getenv("OMPI_MCA_coll_gpuwire_select_file");
  if (file != nullptr && *file != '\0' &&
      gw_sel_load_file(file, t.get(), err, sizeof(err)) != 0) {
    s.error = std::string(err) + " (the shipped table applies)";
  }
  s.source = t->source;
  s.gpus = gpus > 0 ? gpus : 1;
  for (size_t i = 0; i < t->n; ++i) {
    const gw_sel_row_t& r = t->rows[i];
    char buf[160];
    gw_sel_format_row(&r, buf, sizeof(buf));
    // One node of this machine: a row applies when its nodes and gpn fit
    // and its rpg is what its ppn gives on these GPUs.
    bool here = (r.nodes == GW_SEL_ANY || r.nodes == 1) &&
                (r.gpn == GW_SEL_ANY || r.gpn == s.gpus);
    if (here && r.ppn != GW_SEL_ANY && r.rpg != GW_SEL_ANY) {
      here = r.rpg == (r.ppn + s.gpus - 1) / s.gpus;
    }
    s.rows.push_back(buf);
    s.applies.push_back(here);
  }
  return s;
}

}  // namespace gpuwire::info
