/* Open MPI's internal (negative) tags across their whole range, through the
 * pml's own entry points as Open MPI's collectives call them. libnbc gives
 * each non-blocking collective of a communicator the next tag down from -27
 * to -INT_MAX/2, far below the 24 bits of pml gpuwire's tag field: every
 * such message must meet the receive posted with its own tag, none may meet
 * another's, and a user's MPI_ANY_TAG receive posted before them must take
 * none of them (it gets the user message sent last). Rank 0 sends to rank 1;
 * the other ranks only take part in the barriers. */
#include <limits.h>

#include "ompi_config.h"
#include "ompi/communicator/communicator.h"
#include "ompi/datatype/ompi_datatype.h"
#include "ompi/mca/pml/pml.h"
#include "p2p.h"

static const int tags[] = {
    -27,                    /* libnbc's first */
    -(1 << 23),             /* the lowest the field holds */
    -(1 << 23) - 1,         /* the first below: truncated, it read as 8388607 */
    -(1 << 23) - 27,
    -(1 << 24) - 5,
    -(INT_MAX / 2) + 1,     /* libnbc's last before it starts again */
    -(INT_MAX / 2) + 2,
};
#define NTAGS (sizeof(tags) / sizeof(tags[0]))

int main(int argc, char **argv)
{
    mt_init(&argc, &argv, MPI_THREAD_SINGLE);
    struct ompi_communicator_t *comm = (struct ompi_communicator_t *)MPI_COMM_WORLD;
    struct ompi_datatype_t *dt = (struct ompi_datatype_t *)MPI_INT;
    for (int round = 0; round < 2; ++round) {
        int got[NTAGS], user = -1;
        MPI_Request reqs[NTAGS], ureq = MPI_REQUEST_NULL;
        if (mt_rank == 1) {
            /* The wildcard first: a message it may take arrives after it. */
            MT_CHECK_MPI(MPI_Irecv(&user, 1, MPI_INT, 0, MPI_ANY_TAG, MPI_COMM_WORLD, &ureq));
            for (size_t i = 0; i < NTAGS; ++i) {
                got[i] = -1;
                /* Posted in reverse order: matching is by tag, not by order. */
                const size_t k = round ? NTAGS - 1 - i : i;
                MT_CHECK_EQ(MCA_PML_CALL(irecv(&got[k], 1, dt, 0, tags[k], comm, &reqs[k])),
                            OMPI_SUCCESS);
            }
        }
        MT_CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        if (mt_rank == 0) {
            for (size_t i = 0; i < NTAGS; ++i) {
                int v = 1000 * round + (int)i;
                MT_CHECK_EQ(MCA_PML_CALL(send(&v, 1, dt, 1, tags[i], MCA_PML_BASE_SEND_STANDARD,
                                              comm)),
                            OMPI_SUCCESS);
            }
            int v = 4242 + round;
            MT_CHECK_MPI(MPI_Send(&v, 1, MPI_INT, 1, 9, MPI_COMM_WORLD));
        }
        if (mt_rank == 1) {
            MT_CHECK_MPI(MPI_Waitall((int)NTAGS, reqs, MPI_STATUSES_IGNORE));
            for (size_t i = 0; i < NTAGS; ++i) {
                if (got[i] != 1000 * round + (int)i) {
                    mt_fail(__FILE__, __LINE__, "tag %d: got %d, want %d", tags[i], got[i],
                            1000 * round + (int)i);
                }
            }
            MPI_Status st;
            MT_CHECK_MPI(MPI_Wait(&ureq, &st));
            MT_CHECK_EQ(user, 4242 + round);
            MT_CHECK_EQ(st.MPI_TAG, 9);
        }
        MT_CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    }
    return mt_finish();
}
