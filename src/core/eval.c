/* eval.c — validation loss over ranks (see eval.h). */
#include "core/eval.h"

#include <stdlib.h>

#include "util/util.h"

double zt_eval_loss(zt_model *m, zt_dataset *val, const zt_config *c, const zt_dist *d) {
    const int B = c->train.micro_batch, T = c->train.seq_len, E = c->eval.batches;
    int32_t *in = zt_malloc((size_t)B * T * sizeof(int32_t)), *tg = zt_malloc((size_t)B * T * sizeof(int32_t));
    int per = (E + d->size - 1) / d->size;
    float *mine = zt_calloc((size_t)per, sizeof(float)), *all = zt_calloc((size_t)per * d->size, sizeof(float));
    for (int k = 0; k < per; k++) {
        int e = k * d->size + d->rank;
        if (e >= E) break;
        for (int i = 0; i < B; i++) {
            uint64_t w = ((uint64_t)e * B + i) % val->n_windows;
            zt_dataset_window(val, w, in + (size_t)i * T, tg + (size_t)i * T);
        }
        mine[k] = zt_model_forward(m, in, tg, B, T);
    }
    MPI_Allgather(mine, per, MPI_FLOAT, all, per, MPI_FLOAT, MPI_COMM_WORLD);
    double sum = 0.0;
    for (int e = 0; e < E; e++) sum += all[(e % d->size) * per + e / d->size];
    free(in);
    free(tg);
    free(mine);
    free(all);
    return sum / E;
}
