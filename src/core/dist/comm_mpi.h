/* comm_mpi.h — the communicator over MPI (a duplicate of MPI_COMM_WORLD).
 *
 * With translate == NULL it works on host memory (the cpu backend's). With a translation from a
 * backend's device addresses to addressable memory it is the devsim communicator: it accepts only
 * device memory (translate panics on anything else) and keeps NCCL's rules (iface/comm.h), so the
 * host code that drives it is the host code that will drive NCCL. Made by the factory only. */
#ifndef ZT_COMM_MPI_H
#define ZT_COMM_MPI_H

#include "iface/backend.h"
#include "iface/comm.h"

zt_comm *zt_comm_mpi_create(zt_backend *be, void *(*translate)(const void *dev));

#endif
