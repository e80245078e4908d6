/* gpu_monitor.h — memory use and utilisation of this rank's GPU through NVML, opened at run time
 * (dlopen of libnvidia-ml.so.1): no build dependency, and an absent library, driver or GPU is fine —
 * open returns NULL and the metrics simply lack the GPU fields. The NVML index is the rank's GPU:
 * the local_rank-th entry of CUDA_VISIBLE_DEVICES when it is a list of indices, else local_rank. */
#ifndef ZT_GPU_MONITOR_H
#define ZT_GPU_MONITOR_H

typedef struct zt_gpu_monitor zt_gpu_monitor;

zt_gpu_monitor *zt_gpu_monitor_open(int local_rank);
/* bytes in use and utilisation in percent (the last sample period); 0 on success */
int zt_gpu_monitor_read(zt_gpu_monitor *g, double *mem_used_bytes, double *util_pct);
void zt_gpu_monitor_close(zt_gpu_monitor *g);   /* accepts NULL */

#endif
