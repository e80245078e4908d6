/* count_attention.c — the counting decorator's attention slots (see backend_count.h, count_internal.h): the
 * materialized, bidirectional and fused attention, and decoding, each following the CUDA backend's launches
 * (cuda/kernels_norm_attn.cu, kernels_attn_fused.cu, kernels_attn_tc.cu) and its mirrors (cuda_backend_ops.cu). */
#include "core/diag/count_internal.h"

/* materialized attention: per sequence b and group member r one batched GEMM over the NKV heads for the scores,
   the softmax rows, one batched GEMM per (b, r) for the output (kernels_norm_attn.cu). Bidirectional attention
   (mask: kernel k of the bidir slot) runs the same launches, its row kernels reading the key mask (B, T) too */
static void att_fwd_count(int k, int B, int T, int C, int NH, int NKV, int mask) {
    if (B > 0 && T > 0 && C > 0) {
        const double G = NH / NKV, hs = C / NH, BT = (double)B * T, att = BT * NH * T;
        cnt_add(k, (long)(2 * B * G), F4 * (BT * C + BT * NKV * hs * G + att)      /* scores */
                                     + F4 * (att + BT * NKV * hs * G + BT * C)); /* out = att @ v */
        cnt_add(k, 1, F4 * 2.0 * att + (mask ? 4.0 * BT : 0));                     /* softmax in place */
    }
}
static void att_bwd_count(int k, int B, int T, int C, int NH, int NKV, int mask) {
    if (B > 0 && T > 0 && C > 0) {
        const double G = NH / NKV, hs = C / NH, BT = (double)B * T, att = BT * NH * T, kv = BT * NKV * hs;
        cnt_add(k, (long)(2 * B * G), F4 * (BT * C + kv * G + att)                     /* datt = dout @ v^T */
                                     + F4 * (att + BT * C + kv * (G - 1) + kv * G)); /* dv (+)= att^T @ dout */
        cnt_add(k, 1, F4 * 3.0 * att + (mask ? 4.0 * BT : 0));                         /* dpre from att, datt */
        cnt_add(k, (long)(2 * B * G), F4 * (att + kv * G + BT * C)                     /* dq = dpre @ k */
                                     + F4 * (att + BT * C + kv * (G - 1) + kv * G)); /* dk (+)= dpre^T @ q */
    }
}
void cnt_att_fwd(zt_backend *be, float *o, float *a, const float *q, int B, int T, int C, int NH, int NKV) {
    const double nq = (double)B * T * (C + 2.0 * NKV * (C / NH)), na = (double)B * NH * T * T;
    cnt_mneed(q, F4 * nq);
    cnt_mkeep(o, F4 * B * T * C);
    cnt_mkeep(a, F4 * na);
    cnt_flush();
    cnt_calls[K_ATT_FWD]++;
    att_fwd_count(K_ATT_FWD, B, T, C, NH, NKV, 0);
    cnt_inner->attention_fwd(be, o, a, q, B, T, C, NH, NKV);
    cnt_mdone();
}
void cnt_att_bwd(zt_backend *be, float *dq, float *da, const float *d, const float *q, const float *a, int B, int T,
                      int C, int NH, int NKV) {
    const double nq = (double)B * T * (C + 2.0 * NKV * (C / NH)), na = (double)B * NH * T * T;
    cnt_mneed(d, F4 * B * T * C);
    cnt_mneed(q, F4 * nq);
    cnt_mneed(a, F4 * na);
    cnt_mkeep(dq, F4 * nq);
    cnt_mkeep(da, F4 * na);
    cnt_flush();
    cnt_calls[K_ATT_BWD]++;
    att_bwd_count(K_ATT_BWD, B, T, C, NH, NKV, 0);
    cnt_inner->attention_bwd(be, dq, da, d, q, a, B, T, C, NH, NKV);
    cnt_mdone();
}
void cnt_batt_fwd(zt_backend *be, float *o, float *a, const float *q, const int32_t *kv, int B, int T, int C,
                       int NH, int NKV) {
    cnt_flush();
    cnt_calls[K_BATT_FWD]++;
    att_fwd_count(K_BATT_FWD, B, T, C, NH, NKV, 1);
    cnt_inner->attention_bidir_fwd(be, o, a, q, kv, B, T, C, NH, NKV);
}
void cnt_batt_bwd(zt_backend *be, float *dq, float *da, const float *d, const float *q, const float *a,
                       const int32_t *kv, int B, int T, int C, int NH, int NKV) {
    cnt_flush();
    cnt_calls[K_BATT_BWD]++;
    att_bwd_count(K_BATT_BWD, B, T, C, NH, NKV, 1);
    cnt_inner->attention_bidir_bwd(be, dq, da, d, q, a, kv, B, T, C, NH, NKV);
}
void cnt_fatt_fwd(zt_backend *be, float *o, float *st, const float *q, int B, int T, int C, int NH, int NKV) {
    const double nq = (double)B * T * (C + 2.0 * NKV * (C / NH));
    /* on tensor cores: qkv as the product's words where it hands them over (2 bytes an element read, not 4) */
    const int pw = cnt_attn_tc && cnt_prec != ZT_PREC_FP32 && cnt_take_product_words(q, (size_t)nq);
    cnt_mneed(pw ? NULL : q, F4 * nq);
    cnt_mkeep(o, F4 * B * T * C);
    cnt_mkeep(st, F4 * B * NH * T * 2);
    /* on tensor cores a kept round_to of qkv is done as it is loaded: qkv written back (and its words, counted there) */
    const int took = cnt_take_round_w(q, (size_t)nq, cnt_attn_tc && cnt_prec != ZT_PREC_FP32 && q != o, 1, K_FATT_FWD);
    cnt_flush();
    cnt_calls[K_FATT_FWD]++;
    if (B > 0 && T > 0 && C > 0) {
        const double BT = (double)B * T, W = C + 2.0 * NKV * (C / NH);
        cnt_add(K_FATT_FWD, 1, (pw ? 2.0 : F4) * BT * W + F4 * (BT * C + BT * NH * 2) + (took ? F4 * nq : 0));
    }
    cnt_inner->attention_fused_fwd(be, o, st, q, B, T, C, NH, NKV);
    cnt_defer_words(K_FATT_FWD, o, (size_t)B * T * C);
    cnt_mdone();
}
/* the fused backward (kernels_attn_fused.cu): D = rowsum(dout * out); dk, dv per 64-key tile with each tile's part
   of dq for the query rows from the tile's first key on written to scratch; dq = the sum of its parts. On tensor cores
   (bf16 / fp16 unless ZT_CUDA_ATTN_TC=0; kernels_attn_tc.cu) no parts: dk, dv, then dq per query tile */
void cnt_fatt_bwd(zt_backend *be, float *dq, float *D, const float *d, const float *q, const float *o,
                       const float *st, int B, int T, int C, int NH, int NKV) {
    const int tc = cnt_attn_tc && cnt_prec != ZT_PREC_FP32;
    const double nq = (double)B * T * (C + 2.0 * NKV * (C / NH)), no = (double)B * T * C;
    /* on tensor cores dout as the product's words where it hands them over (each of the three kernels reads it) */
    const int pw = tc && d != o && d != q && d != dq && cnt_take_product_words(d, (size_t)no);
    const void *pwd = pw ? zt_mirror16_find(&cnt_mir, d, (size_t)no) : NULL;
    cnt_mneed(pw ? NULL : d, F4 * no);
    cnt_mneed(tc ? NULL : q, F4 * nq); /* on tensor cores qkv and out are read as their words where they have them */
    cnt_mneed(tc ? NULL : o, F4 * no);
    cnt_mneed(st, F4 * B * NH * T * 2);
    cnt_mkeep(dq, F4 * nq);
    cnt_mkeep(D, F4 * (double)zt_attention_fused_scratch_for(B, T, C, NH, tc));
    const int live = B > 0 && T > 0 && C > 0;
    const int qw = tc && live && cnt_mfind(q, nq), ow = tc && live && cnt_mfind(o, no);
    /* on tensor cores a kept round_to of dout is done as it is loaded; the dq kernel writes it back */
    const int took = cnt_take_round(d, (size_t)no, tc && d != o && d != q && d != dq && !pw);
    cnt_flush();
    cnt_calls[K_FATT_BWD]++;
    if (live) {
        const double BT = (double)B * T, hs = C / NH, KV = (double)NKV * hs, W = C + 2.0 * KV, rows = BT * NH;
        double part_rows = 0;
        for (int k0 = 0; k0 < T; k0 += 64) part_rows += T - k0;
        const double parts = (double)B * NH * part_rows * hs;
        cnt_add(K_FATT_BWD, 1, F4 * (2.0 * BT * C + rows) - (ow ? 2.0 * BT * C : 0) - (pw ? 3 * 2.0 * BT * C : 0));
        if (tc) { /* qkv read by both kernels: 2 bytes an element as words */
            cnt_add(K_FATT_BWD, 1, F4 * (BT * W + BT * C + 3.0 * rows + BT * 2 * KV) - (qw ? 2.0 * BT * W : 0));
            cnt_add(K_FATT_BWD, 1, F4 * (BT * W + BT * C + 3.0 * rows + BT * C + (took ? BT * C : 0)) - (qw ? 2.0 * BT * W : 0));
        } else {
            cnt_add(K_FATT_BWD, 1, F4 * (BT * W + BT * C + 3.0 * rows + BT * 2 * KV + parts));
            cnt_add(K_FATT_BWD, 1, F4 * (parts + BT * C));
        }
    }
    cnt_inner->attention_fused_bwd(be, dq, D, d, q, o, st, B, T, C, NH, NKV);
    cnt_defer_words_from(K_FATT_BWD, dq, (size_t)B * T * (C + 2 * (size_t)NKV * (C / NH)),
                         qw ? zt_mirror16_find(&cnt_mir, q, (size_t)nq) : NULL,
                         ow ? zt_mirror16_find(&cnt_mir, o, (size_t)no) : NULL, pwd);
    cnt_mdone();
}
void cnt_att_dec(zt_backend *be, float *o, float *kc, float *vc, const float *q, int pos, int maxT, int C, int NH,
                      int NKV) {
    cnt_flush();
    cnt_calls[K_ATT_DEC]++;
    if (C > 0) {
        const double KV = (double)NKV * (C / NH);
        cnt_add(K_ATT_DEC, NH / NKV > 1 ? 2 : 1, F4 * (C + 2.0 * KV + 2.0 * KV + 2.0 * (pos + 1) * KV + C));
    }
    cnt_inner->attention_decode(be, o, kc, vc, q, pos, maxT, C, NH, NKV);
}
