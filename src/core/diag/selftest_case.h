/* selftest_case.h — a case of the selftest's op table (selftest_ops.c) and what builds and checks one
 * (selftest_case.c): seeded inputs, uploads and downloads, and the comparison of a device against cpu. */
#ifndef ZT_SELFTEST_CASE_H
#define ZT_SELFTEST_CASE_H

#include <stdint.h>
#include <stdio.h>

#include "iface/backend.h"

/* ------------------------------------------------------------------ cases */

#define MAXIO 4

typedef struct st_case {
    const char *name;
    float nmse_max, rel_max;             /* thresholds (fp32) */
    int fp32_out;                        /* outputs stay fp32 in every precision (master-weight ops) */
    float units16;                       /* bf16 / fp16 limits in units of the precision (0: 1); more than 1 where
                                            a device's op rounds inside (the tensor-core attention's p and ds) */
    unsigned int_in;                     /* bit i: input i holds int32 (tokens): never rounded */
    int n_in;
    float *in[6];                        /* host inputs (float or int32 bit patterns) */
    size_t in_n[6];
    int n_out;
    const char *out_name[MAXIO];
    size_t out_n[MAXIO];
    float *out[3][MAXIO];                /* [run][output]: run 0 = cpu, 1 = D, 2 = D again */
    int B, T, C, NH, N, OC, M, K, V, Vp, flag;
    int NKV, I, pos0;                    /* key/value heads (0: NH), SwiGLU's width, rope's first position */
} st_case;

/* the attention's key/value heads and a qkv row's width ((NH + 2 NKV) hs: iface/backend.h) */
static inline int kv_heads(const st_case *k) { return k->NKV ? k->NKV : k->NH; }
static inline size_t qkv_width(const st_case *k) { return (size_t)(k->NH + 2 * kv_heads(k)) * (size_t)(k->C / k->NH); }


typedef void (*st_fn)(zt_backend *be, st_case *k, float **out);

/* a host buffer into new backend memory (h NULL: uninitialised), and backend memory back to the host */
float *st_up(zt_backend *be, const float *h, size_t n);
void st_down(zt_backend *be, float *h, const float *d, size_t n);
/* the inputs' random stream (seeded per table run), n normal values of the scale, n ints in [0, hi) */
void st_seed(uint64_t seed);
uint64_t st_next(void);
float *st_rnd(size_t n, float scale);
float *st_ints(size_t n, int hi);
void st_add_in(st_case *k, float *x, size_t n);
void st_add_in_int(st_case *k, float *x, size_t n);
void st_add_out(st_case *k, const char *name, size_t n);
/* the precision the current case runs in (ZT_PREC_*: st_check_case's prec) */
int st_prec(void);
/* runs one case on cpu, dev, dev in precision prec; prints one row per output; returns the failed outputs */
int st_check_case(st_case *k, st_fn fn, zt_backend *cpu, zt_backend *dev, int prec, FILE *out);

#endif
