/* devsim.h — the device-simulating backend (docs/design.md section 8): the cpu backend's arithmetic behind
 * memory the host cannot read.
 *
 * What it is for: on a machine without a GPU, prove that nothing outside a backend touches backend
 * memory, i.e. that the CUDA backend will not meet a host-pointer leak. `alloc` hands out addresses
 * in a PROT_NONE reservation, so any direct host access (a loop over m->params, a memcpy, an MPI
 * call on a buffer) crashes at once with SIGSEGV; every slot translates its pointer arguments to
 * the real memory, which sits at a fixed offset in a second reservation, and runs the cpu backend's
 * code on them. Same code, same threads: results equal the cpu backend's bit for bit, so a devsim
 * run is compared with a cpu run by equality (tests/e2e/test_devsim.sh, ZT_TEST_DEVICE=devsim).
 *
 * Memory kind ZT_MEM_DEVICE. Device memory is process-wide (like one GPU context): every devsim
 * backend of the process shares it, so a buffer from one instance may be used by another
 * (e.g. a sampler made with another thread count). Reached only through the factory
 * (core/dist/backend_factory.h); the devsim communicator is core/dist/comm_mpi.c over zt_devsim_host_ptr().
 */
#ifndef ZT_DEVSIM_H
#define ZT_DEVSIM_H

#include "iface/backend.h"

/* threads <= 0: the OpenMP default (as the cpu backend) */
zt_backend *zt_devsim_backend_create(int threads);

/* The real (host-readable) address behind a devsim device address; NULL -> NULL. Any other
   pointer is a bug and panics ("a host pointer was passed where device memory is expected").
   For communicators and other code that stands in for device-side hardware only. */
void *zt_devsim_host_ptr(const void *dev);

/* bytes this process copied host -> device and device -> host through every devsim backend so far (to_device /
   to_host): the transfers zero.offload adds are counted here (results.json) */
void zt_devsim_transfers(double *h2d, double *d2h);

#endif
