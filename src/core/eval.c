/* eval.c — validation loss over ranks (see eval.h). */
#include "core/eval.h"

#include <stdlib.h>

#include "util/util.h"

int zt_eval_sequences(const zt_config *c) {
    return c->eval.batches > 0 ? c->eval.batches * c->train.micro_batch : c->eval.sequences;
}

double zt_eval_loss(zt_model *m, zt_dataset *val, const zt_config *c, const zt_dist *d) {
    const int B = c->train.micro_batch, T = c->train.seq_len, S = zt_eval_sequences(c);
    const int per = (S + d->size - 1) / d->size; /* sequences per rank (the last ranks may have one fewer) */
    int32_t *in = zt_malloc((size_t)B * T * sizeof(int32_t)), *tg = zt_malloc((size_t)B * T * sizeof(int32_t));
    double *mine = zt_calloc((size_t)per, sizeof(double)), *all = zt_calloc((size_t)per * d->size, sizeof(double));
    for (int k0 = 0; k0 < per; k0 += B) {
        int nb = 0; /* sequences in this forward pass */
        for (int k = k0; k < k0 + B && k < per; k++) {
            int s = k * d->size + d->rank;
            if (s >= S) break;
            zt_dataset_window(val, (uint64_t)s % val->n_windows, in + (size_t)nb * T, tg + (size_t)nb * T);
            nb++;
        }
        if (nb == 0) break;
        zt_model_forward(m, in, tg, nb, T);
        for (int i = 0; i < nb; i++) { /* per-token losses of the pass, row i = sequence k0 + i */
            double sum = 0.0;
            for (int t = 0; t < T; t++) sum += m->losses_host[(size_t)i * T + t];
            mine[k0 + i] = sum / T;
        }
    }
    MPI_Allgather(mine, per, MPI_DOUBLE, all, per, MPI_DOUBLE, MPI_COMM_WORLD);
    double sum = 0.0;
    for (int s = 0; s < S; s++) sum += all[(size_t)(s % d->size) * per + s / d->size];
    free(in);
    free(tg);
    free(mine);
    free(all);
    return sum / S;
}
