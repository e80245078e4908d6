/* eval.c — validation loss over ranks (see eval.h). */
#include "core/model/eval.h"

#include <math.h>
#include <stdlib.h>

#include "core/model/mlm.h"
#include "util/util.h"

int zt_eval_sequences(const zt_config *c) {
    return c->eval.batches > 0 ? c->eval.batches * c->train.micro_batch : c->eval.sequences;
}

int zt_eval_count(const zt_config *c, const zt_dataset *val) {
    const int S = zt_eval_sequences(c);
    return (uint64_t)S > val->n_windows ? (int)val->n_windows : S;
}

int zt_eval_loss(zt_model *m, zt_dataset *val, const zt_config *c, const zt_dist *d, const volatile sig_atomic_t *stop,
                 double *loss, double *acc) {
    const int B = c->train.micro_batch, T = c->train.seq_len, S = zt_eval_count(c, val);
    const int per = (S + d->size - 1) / d->size; /* sequences per rank (the last ranks may have one fewer) */
    int32_t *in = zt_malloc((size_t)B * T * sizeof(int32_t)), *tg = zt_malloc((size_t)B * T * sizeof(int32_t));
    /* per sequence: (its mean loss over its counted targets, 1), or (0, 0) when it has none */
    double *mine = zt_calloc((size_t)per * 2, sizeof(double)), *all = zt_calloc((size_t)per * 2 * d->size, sizeof(double));
    int stopped = 0;
    zt_mlm mlm; /* encoders: the fixed masked set */
    if (m->s.encoder) zt_mlm_init(&mlm, c, ZT_MLM_VAL_SEED);
    long long hits[2] = {0, 0}; /* encoders: masked positions scored, and those predicted */
    /* every rank runs the same number of passes (a rank without a sequence in the last one skips its
       forward), so the per-pass agreement is always reached by all */
    for (int k0 = 0; k0 < per && !stopped; k0 += B) {
        int nb = 0; /* sequences in this forward pass */
        for (int k = k0; k < k0 + B && k < per; k++) {
            int s = k * d->size + d->rank;
            if (s >= S) break;
            zt_dataset_window(val, (uint64_t)s, in + (size_t)nb * T, tg + (size_t)nb * T);
            if (m->s.encoder) zt_mlm_apply(&mlm, (uint64_t)s, in + (size_t)nb * T, tg + (size_t)nb * T, T);
            nb++;
        }
        if (nb == 0 && m->opt.sharded) { /* ZeRO-3: the forward's gathers are collective, so this rank runs one on
                                            a sequence it does not score */
            zt_dataset_window(val, 0, in, tg);
            zt_model_forward(m, in, tg, 1, T);
        }
        if (nb > 0) {
            zt_model_forward(m, in, tg, nb, T);
            hits[0] += m->counted;
            hits[1] += m->correct;
            for (int i = 0; i < nb; i++) { /* per-token losses of the pass, row i = sequence k0 + i */
                double sum = 0.0;
                int n = 0; /* counted targets (an ignored one, < 0, has loss 0) */
                for (int t = 0; t < T; t++) {
                    sum += m->losses_host[(size_t)i * T + t];
                    n += tg[(size_t)i * T + t] >= 0;
                }
                mine[2 * (k0 + i)] = n > 0 ? sum / n : 0.0;
                mine[2 * (k0 + i) + 1] = n > 0;
            }
        }
        if (stop) {
            int mine_stop = *stop != 0;
            ZT_MPI(MPI_Allreduce(&mine_stop, &stopped, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
        }
    }
    double sum = 0.0;
    if (!stopped) {
        ZT_MPI(MPI_Allgather(mine, 2 * per, MPI_DOUBLE, all, 2 * per, MPI_DOUBLE, MPI_COMM_WORLD));
        int scored = 0;
        for (int s = 0; s < S; s++) {
            const double *x = all + 2 * ((size_t)(s % d->size) * per + s / d->size);
            if (x[1] == 0.0) continue; /* no counted target */
            sum += x[0];
            scored++;
        }
        *loss = scored > 0 ? sum / scored : 0.0;
        ZT_MPI(MPI_Allreduce(MPI_IN_PLACE, hits, 2, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD));
        if (acc) *acc = m->s.encoder && hits[0] > 0 ? (double)hits[1] / (double)hits[0] : NAN;
    }
    free(in);
    free(tg);
    free(mine);
    free(all);
    return stopped;
}
