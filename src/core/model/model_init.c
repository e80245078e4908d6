/* model_init.c — what a model is before it runs: GPT-2's seeded weight initialisation, the storage options a
 * config asks for, the shape from a config and the FLOPs per token. */
#include "core/model/model.h"

#include <math.h>
#include <string.h>

#include "util/util.h"

size_t zt_model_init_block_host(const zt_param_table *pt, const zt_model_shape *s, int i, size_t block, float *p,
                                float std, uint64_t seed) {
    const zt_tensor_info *t = &pt->t[i];
    const size_t off = block * ZT_INIT_BLOCK;
    ZT_ASSERT(off < t->numel);
    const size_t n = t->numel - off < ZT_INIT_BLOCK ? t->numel - off : ZT_INIT_BLOCK;
    const char *nm = t->name;
    size_t len = strlen(nm);
    if (len > 5 && strcmp(nm + len - 5, ".bias") == 0) {
        memset(p, 0, n * sizeof(float));
        return n;
    }
    /* the normalisations' weights (ln_1, ln_2, ln_f; an encoder's emb_ln and head.ln) */
    if (strstr(nm, "ln_") != NULL || strstr(nm, "ln.weight") != NULL) {
        for (size_t j = 0; j < n; j++) p[j] = 1.0f;
        return n;
    }
    /* GPT-2 scales its residual projections by 1 / sqrt(2L); BERT's initialisation does not */
    const float sd = strstr(nm, "c_proj.weight") && !s->encoder ? std / sqrtf(2.0f * (float)s->n_layer) : std;
    /* the padded rows of wte stay 0, and an encoder's padding row (transformers' padding_idx) */
    size_t real = i == 0 ? (size_t)s->vocab_size * s->n_embd : t->numel;
    const size_t C = (size_t)s->n_embd, pad0 = i == 0 && s->encoder && s->pad_id >= 0 ? (size_t)s->pad_id * C : real;
    zt_rng r;
    zt_rng_seed(&r, seed * 0x9E3779B97F4A7C15ull + ((uint64_t)i << 32) + block + 1);
    for (size_t j = 0; j < n; j++) {
        const double v = zt_rng_normal(&r) * sd; /* drawn for every element: the stream does not depend on pad_id */
        p[j] = off + j < real && (off + j < pad0 || off + j >= pad0 + C) ? (float)v : 0.0f;
    }
    return n;
}

void zt_model_init_weights_host(const zt_param_table *pt, const zt_model_shape *s, float *host,
                                float std, uint64_t seed) {
    for (int i = 0; i < pt->n; i++)
        for (size_t off = 0; off < pt->t[i].numel; off += ZT_INIT_BLOCK)
            zt_model_init_block_host(pt, s, i, off / ZT_INIT_BLOCK, host + pt->t[i].offset + off, std, seed);
}

zt_model_opts zt_model_opts_from_config(const zt_config *c) {
    const int prec = zt_config_prec(c) != ZT_PREC_FP32;
    const int gpu = strcmp(c->device, "cuda") == 0 || strcmp(c->device, "cudasim") == 0;
    zt_model_opts o = {0};
    o.recompute = strcmp(c->train.recompute, "layer") == 0  ? ZT_RECOMPUTE_LAYER
                  : strcmp(c->train.recompute, "gelu") == 0 ? ZT_RECOMPUTE_GELU
                                                            : ZT_RECOMPUTE_NONE;
    o.act16 = o.recompute != ZT_RECOMPUTE_LAYER && strcmp(c->train.act_storage, "auto") == 0 && prec;
    o.att_fused = strcmp(c->train.attention, "auto") == 0 && gpu;
    o.att_tc = o.att_fused && prec && zt_attention_tc_on();
    /* param_storage auto: where the words and the fp32 window (wte or one layer, whichever is larger, plus wpe and
       ln_f) take fewer bytes than float32 parameters, i.e. the window holds less than half of them (GPT-2 124M:
       32%; not d6, whose wte is 64% of its parameters) */
    const double C = c->model.n_embd, layer = 12.0 * C * C + 13.0 * C, wte = (double)zt_config_padded_vocab(c) * C;
    const double fixed = (double)c->model.block_size * C + 2.0 * C;
    const double window = (wte > layer ? wte : layer) + fixed, total = wte + c->model.n_layer * layer + fixed;
    zt_model_shape s;
    zt_model_shape_from_config(c, &s);
    o.sharded = c->zero.stage == 3; /* the parameters live in shards (2-byte words in bf16/fp16): no params16 */
    o.logits16 = prec && !s.encoder;
    o.head_chunks = s.encoder ? 1 : c->train.head_chunks;
    o.params16 = prec && !c->lora.enabled && !o.sharded && zt_shape_gpt2_layout(&s) &&
                 (strcmp(c->train.param_storage, "precision") == 0 ||
                  (strcmp(c->train.param_storage, "auto") == 0 && gpu && 2.0 * window < total));
    return o;
}

void zt_model_shape_from_config(const zt_config *c, zt_model_shape *s) {
    char err[ZT_ERR_BUF];
    if (zt_config_shape(c, s, err, sizeof err)) zt_panic(__FILE__, __LINE__, "%s (the config was validated)", err);
}

double zt_model_flops_per_token(const zt_model_shape *s, int T) {
    /* 6 per weight of the layers (matmuls: forward 2, backward 4), the LM head's 6 C Vp, and the causal attention's
       6 L C T (QK^T and AV over the half of the T x T that is computed, forward and backward) */
    const double C = s->n_embd, L = s->n_layer, Q = zt_shape_qkv(s), F = zt_shape_fc(s);
    const double per_layer = C * Q + C * C + C * F + (double)s->ffn * C;
    /* an encoder's attention is bidirectional (the whole T x T: twice the causal half) and its MLM head has a dense
       C x C before the decoder */
    if (s->encoder) return 6.0 * L * per_layer + 6.0 * C * C + 6.0 * C * s->padded_vocab + 12.0 * L * C * T;
    return 6.0 * L * per_layer + 6.0 * C * s->padded_vocab + 6.0 * L * C * T;
}

double zt_model_train_flops_per_token(const zt_model_shape *s, int T, size_t lora_params) {
    const double f = zt_model_flops_per_token(s, T);
    if (!lora_params) return f;
    const double att = 6.0 * s->n_layer * s->n_embd * T;
    return (f - att) * 4.0 / 6.0 + att + 6.0 * (double)lora_params;
}

double zt_model_recompute_flops_per_token(const zt_model_shape *s, int T) {
    const double C = s->n_embd, L = s->n_layer, Q = zt_shape_qkv(s), F = zt_shape_fc(s);
    return 2.0 * L * (C * Q + C * C + C * F + (double)s->ffn * C) + (s->encoder ? 4.0 : 2.0) * L * C * T;
}

void zt_model_rope_table(const zt_model_shape *s, float *cs) {
    const int hs = s->n_embd / s->n_head, half = hs / 2;
    for (int i = 0; i < half; i++) {
        double inv = pow(s->rope_theta, -2.0 * i / hs); /* transformers: 1 / theta^(2i / hs) */
        if (s->rope_factor > 0) { /* Llama 3.1's scaling of the long wavelengths */
            const double wavelen = 2.0 * M_PI / inv, lo = s->rope_orig_max / s->rope_low_freq;
            const double hi = s->rope_orig_max / s->rope_high_freq;
            if (wavelen > lo) inv /= s->rope_factor;
            else if (wavelen >= hi) {
                const double sm = (s->rope_orig_max / wavelen - s->rope_low_freq) / (s->rope_high_freq - s->rope_low_freq);
                inv = (1.0 - sm) * inv / s->rope_factor + sm * inv;
            }
        }
        for (int t = 0; t < s->block_size; t++) {
            const double ang = (double)t * inv;
            cs[((size_t)t * half + i) * 2] = (float)cos(ang);
            cs[((size_t)t * half + i) * 2 + 1] = (float)sin(ang);
        }
    }
}
