/*
 * Cross-memory attach to the host windows of ranks on this node
 * (osc_gpuwire_cma.c): no Open MPI type, no GPU.
 */
#ifndef OSC_GPUWIRE_CMA_H
#define OSC_GPUWIRE_CMA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* 0 when this process may read process pid's memory at addr, else -1 with
 * why. */
int gw_osc_cma_probe(int pid, uint64_t addr, char *why, size_t why_len);
/* Copies len bytes between local memory and process pid's memory at remote
 * (put: local to remote), synchronously. 0, or -1 with why (some bytes may
 * have moved). */
int gw_osc_cma_copy(int pid, bool put, void *local, uint64_t remote, size_t len, char *why,
                    size_t why_len);

#endif
