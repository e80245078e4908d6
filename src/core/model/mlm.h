/* mlm.h — the masked-language-model objective's masks (BERT's recipe): which positions of a sequence are
 * predicted and what the encoder sees there.
 *
 * Each position t of sequence s (its global index: the training sample index, or the validation window) is
 * decided by counter-based hashes of (seed, s, t) alone, so the masks are the same for any rank count,
 * micro-batch size and thread count, and on resume. With h_k = zt_mix64(seed ^ zt_mix64(s * 0x9E3779B97F4A7C15 +
 * t * 0xD1B54A32D192ED03 + k)) (k = 1, 2, 3), and u_k = the top 24 bits of h_k over 2^24:
 *   selected:  u_1 < prob, and the token is not special (padding, [CLS], [SEP], [MASK]) and its target counts
 *              (a shard's loss mask 0 marks padding);
 *   replaced:  u_2 < mask_frac: [MASK]; else u_2 < mask_frac + random_frac: token h_3 mod vocab (any token, as
 *              transformers' DataCollatorForLanguageModeling draws); else unchanged.
 * The thresholds are compared as integers (floor(x 2^24)): no floating point decides a mask. A selected
 * position's target is its original token; every other target is -1 (ignored by the loss).
 * Training uses seed = train.seed (each sample's masks differ from epoch to epoch, as RoBERTa's dynamic
 * masking); validation a fixed seed, ZT_MLM_VAL_SEED, so every evaluation scores the same masked set. */
#ifndef ZT_MLM_H
#define ZT_MLM_H

#include <stdint.h>

#include "io/config.h"

#define ZT_MLM_VAL_SEED 0x6D6C6D2D76616CULL /* "mlm-val" */

typedef struct zt_mlm {
    uint64_t seed;
    uint32_t sel, msk, rnd;    /* prob, mask_frac, mask_frac + random_frac as floor(x 2^24) */
    int32_t mask_id, vocab;
    int32_t special[4];        /* never selected: pad, cls, sep, mask (-1: none) */
} zt_mlm;

/* the config's mlm.* and model.pad_id/sep_id (its encoder shape), with seed */
void zt_mlm_init(zt_mlm *o, const zt_config *c, uint64_t seed);
/* sequence s: tokens (T) replaced in place where selected; targets (T): on entry -1 where the position cannot be
   a target (padding), anything else otherwise; on return the original token at selected positions, -1
   elsewhere. Returns the number selected */
int zt_mlm_apply(const zt_mlm *o, uint64_t s, int32_t *tokens, int32_t *targets, int T);

#endif
