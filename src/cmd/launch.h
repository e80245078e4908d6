/* launch.h — `ztrain launch`: start `ztrain <args>` on N ranks through the right MPI launcher and
 * exec it (signals and the exit code pass straight through). A launcher, not an MPI program: it
 * never calls MPI_Init (main.c dispatches it before zt_dist_init).
 *
 *   ztrain launch [-n N | --per-node N] [--nodes HOSTFILE] [--dry-run] -- train -c CFG ...
 *
 * Layout when -n is not given:
 *   - GPU node (CUDA backend built and GPUs visible): one rank per GPU, threads = cores / GPUs.
 *   - CPU: one rank per up to 8 cores (ranks = ceil(cores / 8), threads = cores / ranks): fewer,
 *     wider ranks mean less gradient traffic, and the BLAS work of a rank splits over its threads
 *     bit-identically. 2 cores -> 1 rank x 2 threads; 16 -> 2 x 8; 64 -> 8 x 8.
 * Inside a Slurm allocation (SLURM_JOB_ID and SLURM_NTASKS set): `srun --mpi=pmix` with the
 * allocation's task count. Elsewhere `mpirun`: `--bind-to none` when a rank has more than one
 * thread or ranks outnumber cores (`--oversubscribe` then), `--bind-to core` otherwise; as root the
 * OMPI_ALLOW_RUN_AS_ROOT variables; with --nodes a hostfile and `--map-by ppr:K:node`.
 * --dry-run prints the layout (a `#` line) and the exact command, shell-quoted, env first.
 * Errors (one line, exit 2): no launcher on PATH, more ranks than GPUs, an unreadable hostfile,
 * nothing after `--`. */
#ifndef ZT_CMD_LAUNCH_H
#define ZT_CMD_LAUNCH_H

int zt_cmd_launch(int argc, char **argv);

#endif
