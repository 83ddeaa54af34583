/*
 * Keeps the component's shared object loaded until the process exits.
 *
 * Open MPI dlcloses components at finalize. gpuwire's library registers
 * callbacks that outlive that point: the statically linked CUDA runtime
 * registers exit handlers, and UCX's memory hooks may call back on any later
 * munmap. Unloading the code under them would crash the process at exit, so
 * the library pins itself (RTLD_NODELETE) when it is first registered.
 */
#ifndef GPUWIRE_PIN_H
#define GPUWIRE_PIN_H

/* Returns 0 on success; on failure writes a one-line reason into why. */
int gw_pin_self(const void *symbol_in_this_library, char *why, unsigned long why_len);

#endif
