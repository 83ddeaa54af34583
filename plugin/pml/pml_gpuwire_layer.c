/*
 * libgpuwire_mpi.so without LD_PRELOAD. The MPI-layer calls (MPI_Pack,
 * Sendrecv_replace, File I/O, Bsend, ...) run in Open MPI's MPI layer with
 * the CPU and never reach a PML; on a device buffer they crash. The PML
 * Open MPI selected opens the library (beside the components, through this
 * component's RUNPATH, or where the dynamic linker finds it) and has it
 * point the program's calls at its wrappers
 * (gw_mpi_layer_install, tools/mpi_layer/install.c; a preloaded library is
 * left as it is): the application runs unchanged. docs/device_memory.md.
 */
#define _GNU_SOURCE
#include <dlfcn.h>

#include "pml_gpuwire.h"

typedef int (*gw_layer_install_fn)(int *slots, int *objects, char *why, size_t why_len);

void mca_pml_gpuwire_layer_install(int mode, bool has_gpu, int output)
{
    if (mode == 0) return;
    if (mode == 1 && !has_gpu) return;
    /* Kept open for the process's life (the library is nodelete anyway):
     * the program's calls go to it from now on. */
    void *lib = dlopen("libgpuwire_mpi.so", RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        opal_output(0,
                    "pml:gpuwire: MPI_Pack, Sendrecv_replace and File I/O stay host-only: %s; "
                    "install libgpuwire_mpi.so beside the components or preload it",
                    dlerror());
        return;
    }
    gw_layer_install_fn install = (gw_layer_install_fn)dlsym(lib, "gw_mpi_layer_install");
    char why[256] = "";
    int slots = 0, objects = 0;
    if (install == NULL) {
        snprintf(why, sizeof(why), "the library found is older than this component");
    } else if (install(&slots, &objects, why, sizeof(why)) == 0) {
        opal_output_verbose(5, output, "pml:gpuwire: libgpuwire_mpi.so put in: %d calls of %d objects",
                            slots, objects);
        return;
    }
    opal_output(0,
                "pml:gpuwire: libgpuwire_mpi.so could not take the MPI-layer calls (%s); "
                "preload it (mpirun -x LD_PRELOAD=.../libgpuwire_mpi.so)",
                why);
}
