/*
 * pml/gpuwire's MPI point-to-point entry points (pml_gpuwire_p2p.c), which
 * the module's function table (pml_gpuwire.c) points at.
 */
#ifndef PML_GPUWIRE_P2P_H
#define PML_GPUWIRE_P2P_H

#include "pml_gpuwire.h"

int mca_pml_gpuwire_isend(const void *buf, size_t count, ompi_datatype_t *dtype, int dst, int tag,
                          mca_pml_base_send_mode_t mode, ompi_communicator_t *comm,
                          ompi_request_t **request);
int mca_pml_gpuwire_isend_init(const void *buf, size_t count, ompi_datatype_t *dtype, int dst,
                               int tag, mca_pml_base_send_mode_t mode, ompi_communicator_t *comm,
                               ompi_request_t **request);
int mca_pml_gpuwire_irecv(void *buf, size_t count, ompi_datatype_t *dtype, int src, int tag,
                          ompi_communicator_t *comm, ompi_request_t **request);
int mca_pml_gpuwire_irecv_init(void *buf, size_t count, ompi_datatype_t *dtype, int src, int tag,
                               ompi_communicator_t *comm, ompi_request_t **request);
int mca_pml_gpuwire_send(const void *buf, size_t count, ompi_datatype_t *dtype, int dst, int tag,
                         mca_pml_base_send_mode_t mode, ompi_communicator_t *comm);
int mca_pml_gpuwire_recv(void *buf, size_t count, ompi_datatype_t *dtype, int src, int tag,
                         ompi_communicator_t *comm, ompi_status_public_t *status);
int mca_pml_gpuwire_iprobe(int src, int tag, ompi_communicator_t *comm, int *matched,
                           ompi_status_public_t *status);
int mca_pml_gpuwire_probe(int src, int tag, ompi_communicator_t *comm,
                          ompi_status_public_t *status);
int mca_pml_gpuwire_improbe(int src, int tag, ompi_communicator_t *comm, int *matched,
                            ompi_message_t **message, ompi_status_public_t *status);
int mca_pml_gpuwire_mprobe(int src, int tag, ompi_communicator_t *comm, ompi_message_t **message,
                           ompi_status_public_t *status);
int mca_pml_gpuwire_imrecv(void *buf, size_t count, ompi_datatype_t *dtype,
                           ompi_message_t **message, ompi_request_t **request);
int mca_pml_gpuwire_mrecv(void *buf, size_t count, ompi_datatype_t *dtype,
                          ompi_message_t **message, ompi_status_public_t *status);

#endif
