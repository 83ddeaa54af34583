/* Look-up of Open MPI's PMPI functions, classification and staging for the
 * wrappers (gw_mpi.h). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "gw_mpi.h"

void *gw_mpi_symbol(const char *name)
{
    void *sym = NULL;
    /* libmpi is asked by name first: an application that dlopen-ed it locally
     * (a Python extension module, for one) keeps it out of the global scope. */
    void *lib = dlopen("libmpi.so.40", RTLD_LAZY | RTLD_NOLOAD);
    if (lib) {
        sym = dlsym(lib, name);
        dlclose(lib); /* the application's own reference keeps it loaded */
    }
    if (!sym) sym = dlsym(RTLD_DEFAULT, name);
    return sym;
}

void *gw_pmpi_lookup(const char *name)
{
    void *sym = gw_mpi_symbol(name);
    if (!sym)
        fprintf(stderr,
                "libgpuwire_mpi: %s not found in this process: preload libgpuwire_mpi.so only "
                "into programs that use Open MPI 4.x (libmpi.so.40)\n",
                name);
    return sym;
}

MPI_Datatype gw_mpi_byte(void)
{
    static MPI_Datatype byte;
    MPI_Datatype b = __atomic_load_n(&byte, __ATOMIC_ACQUIRE);
    if (!b) {
        b = (MPI_Datatype)gw_pmpi_lookup("ompi_mpi_byte");
        __atomic_store_n(&byte, b, __ATOMIC_RELEASE);
    }
    return b;
}

int gw_error(int code, const char *call, const char *why)
{
    fprintf(stderr, "libgpuwire_mpi: %s on device memory: %s\n", call, why);
    return code;
}

int gw_is_device(const void *buf)
{
    if (buf == NULL || buf == MPI_IN_PLACE || buf == MPI_BOTTOM) return 0;
    return gw_dev_is_device(buf);
}

int gw_stage_begin(gw_stage_t *st, const void *buf, int is_device, MPI_Count count,
                   MPI_Datatype type, int copy_in)
{
    memset(st, 0, sizeof(*st));
    st->user = (void *)buf;
    st->host = (void *)buf;
    if (!is_device || count <= 0) return MPI_SUCCESS;

    MPI_Count true_lb = 0, true_extent = 0, lb = 0, extent = 0;
    int rc = GW_PMPI(Type_get_true_extent_x, type, &true_lb, &true_extent);
    if (rc == MPI_SUCCESS) rc = GW_PMPI(Type_get_extent_x, type, &lb, &extent);
    if (rc != MPI_SUCCESS) return rc;
    /* Elements repeat every extent bytes (negative extents run backwards). */
    MPI_Count step = (count - 1) * extent;
    MPI_Count lo = true_lb + (step < 0 ? step : 0);
    MPI_Count hi = true_lb + true_extent + (step > 0 ? step : 0);
    st->lo = (MPI_Aint)lo;
    st->bytes = (size_t)(hi - lo);
    if (st->bytes == 0) return MPI_SUCCESS;

    st->temp = gw_dev_host_alloc(st->bytes, buf);
    if (!st->temp) return gw_error(MPI_ERR_NO_MEM, "staging", "no host memory for the temporary");
    st->host = st->temp - st->lo;
    if (copy_in && gw_dev_copy(st->temp, (const char *)buf + st->lo, st->bytes) != 0) {
        gw_dev_host_free(st->temp);
        st->temp = NULL;
        return MPI_ERR_OTHER;
    }
    return MPI_SUCCESS;
}

int gw_stage_end(gw_stage_t *st, int copy_out)
{
    if (!st->temp) return MPI_SUCCESS;
    int rc = MPI_SUCCESS;
    if (copy_out && gw_dev_copy((char *)st->user + st->lo, st->temp, st->bytes) != 0)
        rc = MPI_ERR_OTHER;
    gw_dev_host_free(st->temp);
    st->temp = NULL;
    return rc;
}
