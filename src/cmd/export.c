/* export.c — `ztrain export` (checkpoint -> Hugging Face safetensors + config.json), for GPT2LMHeadModel,
 * through cmd/hf_llama.c LlamaForCausalLM, MistralForCausalLM and Qwen2ForCausalLM, and through cmd/hf_bert.c
 * BertForMaskedLM and RobertaForMaskedLM; `ztrain import` is import.c.
 *
 * Which one: export follows the checkpoint's model.family (gpt2, llama / mistral / qwen2, bert / roberta); a
 * description the Hugging Face class cannot hold (model.* keys overriding the family's choices) is refused naming
 * the key. Import reads config.json beside the tensors: model_type (else architectures) llama, mistral or qwen2
 * is the Llama family, bert or roberta an encoder, whose config.json is required and decides the model (every
 * field hf_llama.c / hf_bert.c does not implement is refused by name; the tensors must then have exactly the
 * shapes it gives); anything else is GPT-2, whose shape comes from the tensors (config.json optional, checked
 * against them). Either way model.* of -c CFG is replaced, and --set may not change the model (model.padded_vocab
 * aside).
 *
 * Layout on disk, as save_pretrained writes it: model.safetensors, or, when the tensors hold more than
 * --max-shard-size bytes (default 5GB = 5e9, transformers' default), model-0000k-of-0000n.safetensors +
 * model.safetensors.index.json (io/safetensors.h zt_st_write_pretrained; the other layout's entry file left
 * in --out by an earlier export is removed). Import reads either.
 *
 * GPT-2 names: ztrain's table already uses GPT-2's names and layouts (Conv1D weights (in, out)), so a
 * tensor is exported as "transformer." + its name; import accepts names with or without that
 * prefix, ignores the attention-mask buffers (h.N.attn.bias / attn.masked_bias) and accepts an
 * lm_head.weight only when it equals wte.weight (ztrain ties them). wte is exported with its V
 * real rows and padded back to Vp zero rows on import, so export -> import is bit-exact.
 *
 * Llama-family names and layouts: hf_llama.c (q|k|v and gate|up are fused and transposed in ztrain; the
 * embedding and an untied LM head are exported with their V rows). Export -> import is bit-exact here too.
 * Encoder names and layouts: hf_bert.c (q|k|v fused and every linear transposed in ztrain; the word embeddings and
 * the decoder bias exported with their V rows; the tied decoder weight left out, as save_pretrained leaves it).
 *
 * Precision: --dtype fp32 (the default) writes the checkpoint's floats as they are; bf16 / fp16 round
 * each to nearest even (op_math.h, as the GPU's __float2bfloat16_rn / __float2half_rn do) and
 * config.json's torch_dtype says so. A finite weight that fp16 cannot hold (|x| >= 65520 would become
 * Inf) is refused before anything is written: a model with an Inf weight is not an export.
 *
 * LoRA checkpoints (lora.enabled): export writes the adapters as PEFT saves them (adapter_model.safetensors
 * with base_model.model.transformer.h.<l>.<module>.lora_A/B.weight, adapter_config.json: r, lora_alpha,
 * use_rslora, target_modules, fan_in_fan_out = true for GPT-2's Conv1D; the Llama family's adapters under
 * base_model.model.model.layers.<l>.self_attn.q_proj ..., nn.Linear, fan_in_fan_out false), for
 * PeftModel.from_pretrained on the base; --merge writes the merged model (W + s (B A)^T) as a plain export instead. */
#define _GNU_SOURCE
#include "cmd/export.h"

#include <errno.h>
#include <libgen.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmd/cli.h"
#include "cmd/hf_bert.h"
#include "cmd/hf_llama.h"
#include "core/dist/backend_factory.h"
#include "core/model/model_load.h"
#include "io/ckpt.h"
#include "io/safetensors.h"
#include "util/json.h"
#include "util/util.h"

#define PREFIX "transformer."

/* ---------------------------------------------------------------- export */

/* --dtype: one row per precision (the name given, safetensors' element type, config.json's torch_dtype) */
static const struct export_dtype {
    const char *name;
    zt_st_dtype st;
    const char *torch;
} export_dtypes[] = {{"fp32", ZT_ST_F32, "float32"}, {"bf16", ZT_ST_BF16, "bfloat16"}, {"fp16", ZT_ST_F16, "float16"}};
#define N_EXPORT_DTYPES ((int)(sizeof export_dtypes / sizeof *export_dtypes))

/* --max-shard-size's default: save_pretrained's "5GB" */
#define DEFAULT_MAX_SHARD 5000000000ull

typedef struct export_ctx {
    zt_backend *be;
    const zt_model *m;
    float *host;          /* ztrain tensor `cur` (-1: none yet) */
    int cur;
    const zt_hf_map *map; /* the Llama family: one row per Hugging Face tensor; NULL: GPT-2 (the table's tensors) */
    float *out;           /* a transposed Hugging Face tensor */
} export_ctx;

static const float *fetch(export_ctx *x, int i) {
    if (x->cur != i) {
        const zt_tensor_info *t = &x->m->table.t[i];
        x->be->i->to_host(x->be, x->host, x->m->params + t->offset, t->numel * sizeof(float));
        x->be->i->sync(x->be);
        x->cur = i;
    }
    return x->host;
}

/* entry i's floats: GPT-2's tensor i (wte: its first V rows), or the Llama family's map row i */
static const float *export_data(void *p, int i) {
    export_ctx *x = p;
    if (!x->map) return fetch(x, i);
    const zt_hf_map *h = &x->map[i];
    const float *zt = fetch(x, h->zt);
    if (h->kind != ZT_HF_TCOLS) return zt + h->c0;
    zt_hf_to_hf(h, &x->m->table.t[h->zt], zt, x->out);
    return x->out;
}

static void write_gpt2_config(FILE *f, const zt_config *c, const char *torch_dtype) {
    const int V = c->model.vocab_size;
    /* GPT2Config; the end-of-text token of a GPT-2 vocabulary is its last one (50256) */
    fprintf(f,
            "{\n  \"_name_or_path\": \"ztrain\",\n  \"activation_function\": \"gelu_new\",\n"
            "  \"architectures\": [\"GPT2LMHeadModel\"],\n  \"attn_pdrop\": 0.0,\n  \"bos_token_id\": %d,\n"
            "  \"embd_pdrop\": 0.0,\n  \"eos_token_id\": %d,\n  \"initializer_range\": %.9g,\n"
            "  \"layer_norm_epsilon\": 1e-05,\n  \"model_type\": \"gpt2\",\n  \"n_ctx\": %d,\n  \"n_embd\": %d,\n"
            "  \"n_head\": %d,\n  \"n_inner\": null,\n  \"n_layer\": %d,\n  \"n_positions\": %d,\n"
            "  \"reorder_and_upcast_attn\": false,\n  \"resid_pdrop\": 0.0,\n"
            "  \"scale_attn_by_inverse_layer_idx\": false,\n  \"scale_attn_weights\": true,\n"
            "  \"summary_activation\": null,\n  \"summary_first_dropout\": 0.0,\n  \"summary_proj_to_labels\": true,\n"
            "  \"summary_type\": \"cls_index\",\n  \"summary_use_proj\": true,\n  \"tie_word_embeddings\": true,\n"
            "  \"use_cache\": true,\n  \"vocab_size\": %d,\n",
            V - 1, V - 1, c->model.init_std, c->model.block_size, c->model.n_embd, c->model.n_head, c->model.n_layer,
            c->model.block_size, V);
    fprintf(f, "  \"torch_dtype\": \"%s\"\n}\n", torch_dtype); /* model.safetensors' precision (--dtype) */
}

/* what is written: the entries (name, shape), their data, config.json's text */
typedef struct export_plan {
    const char *arch;
    int n;
    zt_st_entry *e;
    char (*names)[96];
    zt_hf_map *map;
    export_ctx x;
    char *config;
    size_t config_len;
} export_plan;

/* a GPT-2 checkpoint whose description is GPT-2's: 0, else 1 naming the model.* key GPT2LMHeadModel cannot hold */
static int gpt2_expressible(const zt_model_shape *s, char *err, size_t errlen) {
    const char *key = s->norm != ZT_NORM_LAYER     ? "model.norm"
                      : s->pos != ZT_POS_LEARNED   ? "model.position"
                      : s->mlp != ZT_MLP_GELU      ? "model.mlp"
                      : s->bias != ZT_BIAS_ALL     ? "model.bias"
                      : !s->tied                   ? "model.tie_embeddings"
                      : s->ffn != 4 * s->n_embd    ? "model.intermediate_size"
                      : s->n_kv_head != s->n_head ? "model.n_kv_head"
                                                   : NULL;
    if (!key) return 0;
    return zt_errf(err, errlen, "export: %s: the checkpoint (model.family = gpt2) overrides GPT-2's description there, "
                   "which GPT2LMHeadModel cannot hold", key);
}

static int plan_gpt2(export_plan *p, const zt_loaded_model *lm, const char *torch, char *err, size_t errlen) {
    const zt_param_table *pt = &lm->m.table;
    if (gpt2_expressible(&lm->s, err, errlen)) return 1;
    p->arch = "GPT2LMHeadModel";
    p->n = pt->n;
    p->e = zt_calloc((size_t)p->n, sizeof *p->e);
    p->names = zt_calloc((size_t)p->n, sizeof *p->names);
    for (int i = 0; i < pt->n; i++) {
        const zt_tensor_info *t = &pt->t[i];
        snprintf(p->names[i], sizeof p->names[i], PREFIX "%s", t->name);
        p->e[i] = (zt_st_entry){p->names[i], t->ndim, {i == 0 ? lm->s.vocab_size : t->shape[0], t->shape[1]}};
    }
    FILE *f = open_memstream(&p->config, &p->config_len);
    write_gpt2_config(f, lm->c, torch);
    fclose(f);
    return 0;
}

/* the Llama family or an encoder: config.json and the tensors as hf_llama.c / hf_bert.c map them */
static int plan_hf(export_plan *p, const zt_loaded_model *lm, const char *torch, char *err, size_t errlen) {
    const zt_param_table *pt = &lm->m.table;
    const char *family = lm->c->model.family;
    const int enc = zt_hf_is_encoder(family);
    FILE *f = open_memstream(&p->config, &p->config_len);
    int bad = enc ? zt_hf_bert_config_out(f, lm->c, &lm->s, torch, err, errlen)
                  : zt_hf_llama_config_out(f, lm->c, &lm->s, torch, err, errlen);
    fclose(f);
    p->map = zt_calloc((size_t)ZT_HF_MAX_PARTS * pt->n, sizeof *p->map);
    if (!bad)
        bad = (p->n = enc ? zt_hf_bert_map(pt, &lm->s, family, p->map, err, errlen)
                          : zt_hf_llama_map(pt, &lm->s, p->map, err, errlen)) < 0;
    if (bad) return 1;
    p->arch = zt_hf_arch(family);
    p->e = zt_calloc((size_t)p->n, sizeof *p->e);
    for (int i = 0; i < p->n; i++)
        p->e[i] = (zt_st_entry){p->map[i].name, p->map[i].ndim, {p->map[i].shape[0], p->map[i].shape[1]}};
    return 0;
}

/* the host buffers: the largest ztrain tensor, and (a map) the largest transposed Hugging Face one */
static void plan_buffers(export_plan *p, const zt_loaded_model *lm) {
    size_t maxn = 1, maxt = 1;
    for (int i = 0; i < lm->m.table.n; i++)
        if (lm->m.table.t[i].numel > maxn) maxn = lm->m.table.t[i].numel;
    for (int i = 0; p->map && i < p->n; i++)
        if (p->map[i].kind == ZT_HF_TCOLS && zt_hf_numel(&p->map[i]) > maxt) maxt = zt_hf_numel(&p->map[i]);
    p->x = (export_ctx){lm->be, &lm->m, zt_malloc(maxn * sizeof(float)), -1, p->map, NULL};
    if (p->map) p->x.out = zt_malloc(maxt * sizeof(float));
}

static void plan_free(export_plan *p) {
    free(p->x.host);
    free(p->x.out);
    free(p->config);
    free(p->map);
    free(p->names);
    free(p->e);
}

/* every value fits the precision, then --out, the tensors (save_pretrained's layout) and config.json */
static int write_plan(export_plan *p, const char *out, const struct export_dtype *dt, uint64_t max_shard, int *n_files,
                      char *err, size_t errlen) {
    char rerr[ZT_ERR_BUF], cjp[ZT_PATH_MAX + 32];
    for (int i = 0; i < p->n && dt->st != ZT_ST_F32; i++)
        if (zt_st_check_range(dt->st, &p->e[i], export_data(&p->x, i), rerr, sizeof rerr))
            return zt_errf(err, errlen, "export: --dtype %s: %s: export as %s", dt->name, rerr,
                           dt->st == ZT_ST_F16 ? "bf16 or fp32" : "fp32");
    if (zt_mkdirs(out) != 0) return zt_errf(err, errlen, "export: %s: cannot create: %s", out, strerror(errno));
    if (zt_st_write_pretrained(out, dt->st, p->n, p->e, export_data, &p->x, max_shard, n_files, err, errlen)) return 1;
    snprintf(cjp, sizeof cjp, "%s/config.json", out);
    return zt_write_file_atomic(cjp, p->config, p->config_len, err, errlen);
}

typedef struct adapter_ctx {
    const zt_loaded_model *lm;
    zt_st_dtype st;
} adapter_ctx;

static const float *adapter_data(void *p, int i) {
    const adapter_ctx *x = p;
    return x->lm->adapters + x->lm->lora_table->t[i].offset;
}

/* a LoRA checkpoint's adapters as PEFT writes them: adapter_model.safetensors + adapter_config.json */
static int export_adapters(const zt_loaded_model *lm, const char *path, const char *out, const struct export_dtype *dt,
                           char *err, size_t errlen) {
    const zt_param_table *pt = lm->lora_table;
    zt_st_entry *e = zt_calloc((size_t)pt->n, sizeof *e);
    char(*names)[96] = zt_calloc((size_t)pt->n, sizeof *names);
    /* GPT-2: base_model.model.transformer.h.<l>.<module>.lora_A.weight; the Llama family's modules are nn.Linear
       under model.layers.<l> (fan_in_fan_out false) */
    const int gpt2 = zt_lora_family_bits(&lm->s) == (ZT_LORA_T_QKV | ZT_LORA_T_PROJ | ZT_LORA_T_FC | ZT_LORA_T_FCPROJ);
    for (int i = 0; i < pt->n; i++) {
        const zt_tensor_info *t = &pt->t[i];
        int l = 0, skip = 0;
        if (gpt2 || sscanf(t->name, "h.%d.%n", &l, &skip) != 1 || skip == 0)
            snprintf(names[i], sizeof names[i], "base_model.model." PREFIX "%s.weight", t->name);
        else snprintf(names[i], sizeof names[i], "base_model.model.model.layers.%d.%s.weight", l, t->name + skip);
        e[i] = (zt_st_entry){names[i], t->ndim, {t->shape[0], t->shape[1]}};
    }
    adapter_ctx x = {lm, dt->st};
    char stp[ZT_PATH_MAX + 32], cjp[ZT_PATH_MAX + 32], tmp[ZT_PATH_MAX + 64], rerr[ZT_ERR_BUF];
    snprintf(stp, sizeof stp, "%s/adapter_model.safetensors", out);
    snprintf(cjp, sizeof cjp, "%s/adapter_config.json", out);
    snprintf(tmp, sizeof tmp, "%s.tmp", cjp);
    int bad = 0;
    for (int i = 0; i < pt->n && !bad && dt->st != ZT_ST_F32; i++)
        if (zt_st_check_range(dt->st, &e[i], adapter_data(&x, i), rerr, errlen < sizeof rerr ? errlen : sizeof rerr))
            bad = zt_errf(err, errlen, "export: --dtype %s: %s: export as fp32", dt->name, rerr);
    if (!bad && zt_mkdirs(out) != 0) bad = zt_errf(err, errlen, "export: %s: cannot create: %s", out, strerror(errno));
    if (!bad) bad = zt_st_write_as(stp, dt->st, pt->n, e, adapter_data, &x, err, errlen);
    if (!bad) {
        FILE *f = fopen(tmp, "w");
        if (!f) {
            bad = zt_errf(err, errlen, "%s: cannot create: %s", tmp, strerror(errno));
        } else {
            const zt_lora_cfg *lc = &lm->lora;
            fprintf(f, "{\n  \"peft_type\": \"LORA\",\n  \"task_type\": \"CAUSAL_LM\",\n  \"base_model_name_or_path\": null,\n"
                       "  \"r\": %d,\n  \"lora_alpha\": %.9g,\n  \"lora_dropout\": %.9g,\n  \"use_rslora\": %s,\n"
                       "  \"fan_in_fan_out\": %s,\n  \"bias\": \"none\",\n  \"inference_mode\": true,\n"
                       "  \"init_lora_weights\": true,\n  \"modules_to_save\": null,\n  \"target_modules\": [",
                    lc->rank, lm->c->lora.alpha, lm->c->lora.dropout, lc->rslora ? "true" : "false", /* the config's
                    doubles: 0.05 stays 0.05, not its float */ gpt2 ? "true" : "false");
            int first = 1;
            zt_lora_site st[ZT_LORA_MAX_SITES];
            const int ns = zt_lora_sites(&lm->s, st);
            for (int j = 0; j < ns; j++)
                if (lc->targets & st[j].bit) {
                    fprintf(f, "%s\"%s\"", first ? "" : ", ", st[j].module);
                    first = 0;
                }
            fprintf(f, "]\n}\n");
            int ok = fflush(f) == 0 && fsync(fileno(f)) == 0;
            ok = fclose(f) == 0 && ok;
            if (!ok || rename(tmp, cjp) != 0) {
                unlink(tmp);
                bad = zt_errf(err, errlen, "%s: cannot write: %s", cjp, strerror(errno));
            }
        }
    }
    if (!bad)
        zt_log("exported the LoRA adapters of %s (step %ld): %d tensors, %zu params as %s -> %s + adapter_config.json "
               "(PEFT; base: %s; --merge for merged weights)\n", path, lm->step, pt->n, pt->total,
               zt_st_dtype_name(dt->st), stp, lm->c->lora.base);
    free(names);
    free(e);
    return bad;
}

/* --dtype's row, or exit 2 naming the choices */
static const struct export_dtype *parse_dtype(const char *dtype) {
    for (int i = 0; i < N_EXPORT_DTYPES; i++)
        if (strcmp(dtype, export_dtypes[i].name) == 0) return &export_dtypes[i];
    char names[64] = "";
    for (int i = 0; i < N_EXPORT_DTYPES; i++)
        snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i == 0 ? "" :
                 i == N_EXPORT_DTYPES - 1 ? " or " : ", ", export_dtypes[i].name);
    zt_user_error_all("export: --dtype %s: expected %s", dtype, names);
}

/* the full model (GPT-2, the Llama family or an encoder) on rank 0: 0 or 1 with one line */
static int export_model(const zt_loaded_model *lm, const char *path, const char *out, const struct export_dtype *dt,
                        uint64_t max_shard, zt_dist *d, char *err, size_t errlen) {
    if (d->rank != 0) return 0;
    export_plan p = {0};
    const zt_model_shape *s = &lm->s;
    int bad = strcmp(lm->c->model.family, "gpt2") == 0 ? plan_gpt2(&p, lm, dt->torch, err, errlen)
                                                       : plan_hf(&p, lm, dt->torch, err, errlen);
    int n_files = 0;
    if (!bad) {
        plan_buffers(&p, lm);
        bad = write_plan(&p, out, dt, max_shard, &n_files, err, errlen);
    }
    char files[64];
    if (n_files > 1) snprintf(files, sizeof files, " (%d shards + model.safetensors.index.json)", n_files);
    else snprintf(files, sizeof files, "/model.safetensors");
    size_t numel = 0; /* what is written: without the vocabulary's padding */
    for (int i = 0; !bad && i < p.n; i++)
        numel += (size_t)p.e[i].shape[0] * (size_t)(p.e[i].ndim == 2 ? p.e[i].shape[1] : 1);
    if (!bad)
        zt_log("exported %s (step %ld): %s, %d tensors, %zu params (vocab %d x %d) as %s -> %s%s + config.json\n",
               path, lm->step, p.arch, p.n, numel, s->vocab_size, s->n_embd, zt_st_dtype_name(dt->st), out, files);
    plan_free(&p);
    return bad;
}

int zt_cmd_export(int argc, char **argv, zt_dist *d) {
    char err[ZT_ERR_BUF] = "";
    const char *path = NULL, *format = "safetensors", *out = NULL, *dtype = "fp32", *merge = NULL, *shard = NULL;
    zt_cli_opt opts[] = {{"--checkpoint", 1, &path}, {"--format", 1, &format}, {"--out", 1, &out},
                         {"--dtype", 1, &dtype}, {"--merge", 0, &merge}, {"--max-shard-size", 1, &shard}};
    zt_cli cli;
    if (zt_cli_parse(&cli, argc, argv, opts, 6, err, sizeof err)) zt_user_error_all("%s", err);
    if (!path || !out) zt_user_error_all("export: needs --checkpoint PATH and --out DIR");
    if (strcmp(format, "safetensors") != 0)
        zt_user_error_all("export: --format %s: the only format is safetensors (Hugging Face GPT-2, Llama, Mistral, "
                          "Qwen2, BERT, RoBERTa)", format);
    const struct export_dtype *dt = parse_dtype(dtype);
    const uint64_t max_shard = shard ? zt_st_parse_size(shard) : DEFAULT_MAX_SHARD;
    if (!max_shard)
        zt_user_error_all("export: --max-shard-size %s: expected a size such as 5GB, 500MB, 2GiB or a byte count",
                          shard);
    if (cli.config_path || cli.n_sets) zt_user_error_all("export: takes no -c/--set (the checkpoint has its config)");
    /* before the checkpoint is read: its type (a named pipe would block its open) and a usable --out */
    struct stat ost;
    int bad = zt_check_input_file(path, "a ztrain checkpoint (.h5)", err, sizeof err);
    if (!bad && stat(out, &ost) == 0 && !S_ISDIR(ost.st_mode))
        bad = zt_errf(err, sizeof err, "export: --out %s: %s, not a directory (expected a directory for "
                      "model.safetensors and config.json)", out, zt_file_kind((unsigned)ost.st_mode));
    zt_check_all(bad, err, sizeof err);
    const zt_load_opts lo = {NULL, NULL, 0, 1, 1, 1};
    zt_loaded_model lm;
    zt_loaded_model_open(&lm, path, &lo);
    if (merge && !lm.adapters)
        zt_user_error_all("export: --merge: %s is not a LoRA checkpoint (lora.enabled is false in its config): it "
                          "holds full weights already; drop --merge", path);
    if (lm.adapters && !merge)
        bad = d->rank == 0 ? export_adapters(&lm, path, out, dt, err, sizeof err) : 0;
    else
        bad = export_model(&lm, path, out, dt, max_shard, d, err, sizeof err);
    zt_check_all(bad, err, sizeof err);
    zt_loaded_model_close(&lm);
    return 0;
}
