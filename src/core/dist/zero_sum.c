/* zero_sum.c — the ordered reduction's sum (zero.h): an owner adds the N ranks' parts of its shard in rank
 * order, which is global micro-batch order, so the additions are those of one rank accumulating alone. Shared by
 * stages 0-1 (zero.c) and stage 2's buckets (zero_bucket.c); in its own file so that neither depends on the other
 * for it. */
#include "core/dist/zero.h"

void zt_zero_add_parts(zt_zero *z, float *acc, float *recv, const uint16_t *recv16, size_t L) {
    for (int r = 0; r < z->N; r++) {
        const float *part = recv + (size_t)r * L;
        if (z->wire16) { /* decoded (exactly) into recv's first part, then added */
            z->be->i->unpack16(z->be, recv, recv16 + (size_t)r * L, L, z->prec);
            part = recv;
        }
        z->be->i->accumulate(z->be, acc, part, L);
    }
}
