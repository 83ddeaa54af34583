/*
 * libgpuwire_cuda_aware.so: MPIX_Query_cuda_support() that tells the truth
 * when pml gpuwire carries point-to-point.
 *
 * Debian's and Ubuntu's Open MPI are built without CUDA, so their
 * MPIX_Query_cuda_support() returns 0 whatever PML runs. Preloaded
 *
 *     mpirun -x LD_PRELOAD=/path/libgpuwire_cuda_aware.so --mca pml gpuwire ./app
 *
 * this library's definition comes first in the process's symbol lookup, and
 * answers:
 *
 *   after MPI_Init (and before MPI_Finalize):
 *     1  when the PML Open MPI selected is gpuwire (the PML's function table,
 *        mca_pml, points into mca_pml_gpuwire.so) and the MCA variable
 *        pml_gpuwire_device is on (read through MPI_T, so --mca flags,
 *        OMPI_MCA_ variables and parameter files all count);
 *     otherwise what Open MPI's own MPIX_Query_cuda_support() returns (0 on
 *     a non-CUDA build).
 *   before MPI_Init or after MPI_Finalize (no PML is selected then):
 *     1  when OMPI_MCA_pml is exactly "gpuwire" and OMPI_MCA_pml_gpuwire_device
 *        is not false (mpirun passes --mca flags to the ranks this way);
 *     otherwise Open MPI's own answer.
 *
 * The answer after MPI_Init is computed once and kept. The library links no
 * MPI: it finds Open MPI's library (libmpi.so.40) among those already loaded
 * at the time of the call, so a process that preloads it without MPI (a
 * shell, srun) is unaffected and answers from the environment.
 * It does not change the compile-time macro MPIX_CUDA_AWARE_SUPPORT of
 * <mpi-ext.h> (0 in a non-CUDA build): code that tests the macro alone
 * still sees 0.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "gw_mpi.h"

GW_EXPORT int MPIX_Query_cuda_support(void);

/* -1: not yet known (only answers given while MPI is initialized are kept) */
static atomic_int gw_cached = -1;

/* Open MPI's own answer, 0 when there is none. */
static int gw_ompi_answer(void)
{
    void *lib = dlopen("libmpi.so.40", RTLD_LAZY | RTLD_NOLOAD);
    int (*own)(void) = NULL;
    if (lib) {
        own = (int (*)(void))dlsym(lib, "MPIX_Query_cuda_support");
        dlclose(lib);
    } else {
        own = (int (*)(void))dlsym(RTLD_NEXT, "MPIX_Query_cuda_support");
    }
    return own && own != MPIX_Query_cuda_support ? own() : 0;
}

/* 1 inside MPI_Init .. MPI_Finalize, 0 outside, -1 when no MPI is loaded. */
static int gw_mpi_active(void)
{
    int (*initialized)(int *) = (int (*)(int *))gw_mpi_symbol("PMPI_Initialized");
    int (*finalized)(int *) = (int (*)(int *))gw_mpi_symbol("PMPI_Finalized");
    if (!initialized || !finalized) return -1;
    int init = 0, fin = 0;
    if (initialized(&init) != MPI_SUCCESS || finalized(&fin) != MPI_SUCCESS) return -1;
    return init && !fin;
}

/* Open MPI's boolean spellings; -1 when text is none of them. */
static int gw_parse_bool(const char *text)
{
    static const char *const yes[] = {"1", "true", "yes", "enabled", "t", "y"};
    static const char *const no[] = {"0", "false", "no", "disabled", "f", "n"};
    for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); ++i) {
        if (!strcasecmp(text, yes[i])) return 1;
        if (!strcasecmp(text, no[i])) return 0;
    }
    return -1;
}

/* The environment's view: pml gpuwire asked for, device support not off. */
static int gw_env_answer(void)
{
    const char *pml = getenv("OMPI_MCA_pml");
    if (!pml || strcmp(pml, "gpuwire") != 0) return 0;
    const char *device = getenv("OMPI_MCA_pml_gpuwire_device");
    return device && gw_parse_bool(device) == 0 ? 0 : 1;
}

/* Whether the selected PML is gpuwire: 1, 0, or -1 when Open MPI does not
 * export its PML table. The table (mca_pml_base_module_t) starts with a
 * function pointer (pml_add_procs) in every Open MPI release; the shared
 * object holding that function names the PML. */
static int gw_selected_pml_is_gpuwire(void)
{
    void *const *table = (void *const *)gw_mpi_symbol("mca_pml");
    if (!table || !table[0]) return -1;
    Dl_info info;
    if (!dladdr(table[0], &info) || !info.dli_fname) return -1;
    const char *base = strrchr(info.dli_fname, '/');
    base = base ? base + 1 : info.dli_fname;
    return strncmp(base, "mca_pml_gpuwire", strlen("mca_pml_gpuwire")) == 0;
}

/* The MCA variable pml_gpuwire_device through MPI_T: 1, 0, or -1 unknown. */
static int gw_device_param(void)
{
    int (*t_init)(int, int *) = (int (*)(int, int *))gw_mpi_symbol("PMPI_T_init_thread");
    int (*t_fini)(void) = (int (*)(void))gw_mpi_symbol("PMPI_T_finalize");
    int (*get_index)(const char *, int *) =
        (int (*)(const char *, int *))gw_mpi_symbol("PMPI_T_cvar_get_index");
    int (*alloc)(int, void *, MPI_T_cvar_handle *, int *) =
        (int (*)(int, void *, MPI_T_cvar_handle *, int *))gw_mpi_symbol("PMPI_T_cvar_handle_alloc");
    int (*cvar_read)(MPI_T_cvar_handle, void *) =
        (int (*)(MPI_T_cvar_handle, void *))gw_mpi_symbol("PMPI_T_cvar_read");
    int (*hfree)(MPI_T_cvar_handle *) =
        (int (*)(MPI_T_cvar_handle *))gw_mpi_symbol("PMPI_T_cvar_handle_free");
    if (!t_init || !t_fini || !get_index || !alloc || !cvar_read || !hfree) return -1;

    int provided = 0, result = -1;
    if (t_init(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS) return -1;
    int index = -1, count = 0;
    MPI_T_cvar_handle handle = MPI_T_CVAR_HANDLE_NULL;
    if (get_index("pml_gpuwire_device", &index) == MPI_SUCCESS &&
        alloc(index, NULL, &handle, &count) == MPI_SUCCESS) {
        /* A boolean variable reads as one int; room for a larger type anyway. */
        union {
            int as_int;
            long long room[2];
        } value = {0};
        if (count == 1 && cvar_read(handle, &value) == MPI_SUCCESS) result = value.as_int != 0;
        hfree(&handle);
    }
    t_fini();
    return result;
}

int MPIX_Query_cuda_support(void)
{
    int cached = atomic_load(&gw_cached);
    if (cached >= 0) return cached;

    int active = gw_mpi_active();
    if (active != 1) {
        /* No PML is selected yet (or any more): the environment decides. */
        return gw_env_answer() ? 1 : gw_ompi_answer();
    }
    int answer;
    int selected = gw_selected_pml_is_gpuwire();
    if (selected < 0) selected = gw_env_answer();
    if (selected) {
        int device = gw_device_param();
        if (device < 0) {
            const char *env = getenv("OMPI_MCA_pml_gpuwire_device");
            device = env && gw_parse_bool(env) == 0 ? 0 : 1;
        }
        answer = device ? 1 : gw_ompi_answer();
    } else {
        answer = gw_ompi_answer();
    }
    atomic_store(&gw_cached, answer);
    return answer;
}
