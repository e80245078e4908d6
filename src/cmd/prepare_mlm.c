/* prepare_mlm.c — `ztrain prepare --mlm --seq-len T` (prepare.h "Masked LM"): the checks of the options and the
 * tokenizer, and the packer that frames the documents' ids into sequences of T tokens [CLS] ... [SEP].
 *
 * The packer runs on rank 0 alone, fed by prepare_pipe.c's writer in unit order with each document's ids (the
 * template's ids left out) and a mark where each document starts: one sequential pass over a stream that does not
 * depend on the thread or rank count, so neither do the sequences. The rule, for each split: the documents' ids
 * with [SEP] between consecutive documents, cut into chunks of T - 2 tokens, a [SEP] that would start a chunk left
 * out; each chunk written as [CLS] chunk [SEP]; the last chunk may be shorter and is padded with pad up to T (loss
 * mask 0 there, 1 on every other token, [CLS] and [SEP] included). A [SEP] that ends a chunk is followed by the
 * frame's own: "... [SEP] [SEP]" (never two documents' tokens in one sequence without a [SEP] between them, never
 * padding inside the split). Empty documents add nothing. */
#include "cmd/prepare_internal.h"

#include <stdlib.h>
#include <string.h>

#define MAX_SEQ_LEN (1 << 20)

int prep_mlm_opts(const prep_opts *o) {
    if (!o->mlm) return o->seq_len ? prep_fail("--seq-len T is for --mlm (and --sft)") : 0;
    if (!o->seq_len) return prep_fail("prepare --mlm: no --seq-len T given (the masked-LM run's train.seq_len)");
    if (o->seq_len < 3 || o->seq_len > MAX_SEQ_LEN)
        return prep_fail("--seq-len %ld: expected an integer in 3..%d (an --mlm sequence is [CLS], at least one token, "
                         "[SEP])", o->seq_len, MAX_SEQ_LEN);
    if (!o->tokenizer)
        return prep_fail("prepare --mlm needs --tokenizer PATH with [CLS], [SEP] and [PAD] tokens (a BERT or RoBERTa "
                         "tokenizer.json; a tokenizer trained by --vocab-size has none)");
    if (o->eot_between)
        return prep_fail("--eot-between-docs cannot be combined with --mlm (--mlm puts [SEP] between documents)");
    return 0;
}

int prep_mlm_check(const prep_opts *o, const zt_tokenizer *t) {
    const zt_tok_config *c = zt_tokenizer_config(t);
    char missing[160] = "";
    const struct { uint32_t id; const char *what; } need[3] = {
        {c->cls, "cls ([CLS] or <s>)"}, {c->sep, "sep ([SEP] or </s>)"}, {c->pad, "pad ([PAD] or <pad>)"}};
    for (int k = 0; k < 3; k++)
        if (need[k].id == ZT_TOK_NO_EOT)
            snprintf(missing + strlen(missing), sizeof missing - strlen(missing), "%s%s", *missing ? ", " : "",
                     need[k].what);
    if (!*missing) return 0;
    return prep_fail("%s: prepare --mlm needs cls, sep and pad tokens, and the tokenizer has no %s (expected a BERT "
                     "or RoBERTa tokenizer.json: a BertProcessing, RobertaProcessing or [CLS] $A [SEP] post-processor "
                     "and a [PAD] or <pad> token)", o->tokenizer, missing);
}

/* ---------------------------------------------------------------- the packer */

void prep_pack_init(prep_packer *pk, zt_shard_writer *w, uint32_t T, const zt_tok_config *c) {
    memset(pk, 0, sizeof *pk);
    pk->w = w;
    pk->T = T;
    pk->sep = c->sep;
    pk->pad = c->pad;
    pk->seq = zt_malloc((size_t)T * sizeof *pk->seq);
    pk->mask = zt_malloc(T);
    pk->seq[0] = c->cls;
    pk->n = 1;
}

void prep_pack_free(prep_packer *pk) {
    free(pk->seq);
    free(pk->mask);
    pk->seq = NULL;
    pk->mask = NULL;
}

void prep_pack_doc(prep_packer *pk) { pk->boundary = 1; }

/* the sequence so far, closed with [SEP] and padded to T */
static int flush(prep_packer *pk, char *err, size_t errlen) {
    const uint32_t T = pk->T;
    pk->seq[pk->n++] = pk->sep;
    memset(pk->mask, 1, pk->n);
    for (uint32_t i = pk->n; i < T; i++) {
        pk->seq[i] = pk->pad;
        pk->mask[i] = 0;
    }
    pk->padding += T - pk->n;
    pk->sequences++;
    pk->n = 1;
    return zt_shard_writer_append_masked(pk->w, pk->seq, pk->mask, T, err, errlen);
}

static int push(prep_packer *pk, uint32_t id, char *err, size_t errlen) {
    pk->seq[pk->n++] = id;
    return pk->n == pk->T - 1 ? flush(pk, err, errlen) : 0;
}

int prep_pack_ids(prep_packer *pk, const uint32_t *ids, size_t n, char *err, size_t errlen) {
    for (size_t i = 0; i < n; i++) {
        if (pk->boundary) {
            pk->boundary = 0;
            if (pk->n > 1 && push(pk, pk->sep, err, errlen)) return 1;
        }
        if (push(pk, ids[i], err, errlen)) return 1;
    }
    return 0;
}

int prep_pack_finish(prep_packer *pk, char *err, size_t errlen) {
    return pk->n > 1 ? flush(pk, err, errlen) : 0;
}

void prep_mlm_summary(const prep_opts *o, const zt_tokenizer *t, const prep_packer *pk) {
    const zt_tok_config *c = zt_tokenizer_config(t);
    const long long mask = c->mask == ZT_TOK_NO_EOT ? -1LL : (long long)c->mask;
    printf("mlm: sequences of %ld tokens, [CLS] id %u ... [SEP] id %u, padded with id %u: train %llu sequences, val "
           "%llu (%llu padding tokens)\n", o->seq_len, c->cls, c->sep, c->pad, (unsigned long long)pk[0].sequences,
           (unsigned long long)pk[1].sequences, (unsigned long long)(pk[0].padding + pk[1].padding));
    printf("mlm config: train.seq_len = %ld; model.pad_id = %u; model.sep_id = %u; mlm.cls_id = %u; mlm.sep_id = %u; "
           "mlm.mask_id = %lld%s\n", o->seq_len, c->pad, c->sep, c->cls, c->sep, mask,
           mask < 0 ? " (the tokenizer has no [MASK] / <mask>: set one)" : "");
}
