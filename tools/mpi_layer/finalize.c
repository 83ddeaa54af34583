/* MPI_Finalize, where the layer lets go of what it still holds: the
 * stand-ins of persistent buffered sends never freed (bsend_init.c), and its
 * reference on the GPU context (device_ops.c). Its own file, so that the
 * files it calls into do not call back into one another. */
#include "gw_mpi.h"

/* Before Open MPI's finalize: the components, which took their references
 * on the GPU context in MPI_Init, give theirs back in it, so the last release
 * (the one that destroys the context) stays where it is without this layer. */
GW_EXPORT int MPI_Finalize(void)
{
    gw_pb_release_all();
    gw_dev_close();
    return GW_PMPI(Finalize);
}
