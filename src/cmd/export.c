/* export.c — `ztrain export` (checkpoint -> Hugging Face safetensors + config.json) and `ztrain import`
 * (Hugging Face safetensors -> a ztrain checkpoint at step 0), for GPT2LMHeadModel and, through
 * cmd/hf_llama.c, LlamaForCausalLM, MistralForCausalLM and Qwen2ForCausalLM.
 *
 * Which one: export follows the checkpoint's model.family (gpt2, or llama / mistral / qwen2); a description
 * the Hugging Face class cannot hold (model.* keys overriding the family's choices) is refused naming the
 * key. Import reads config.json beside the tensors: model_type (else architectures) llama, mistral or qwen2
 * is the Llama family, whose config.json is required and decides the model (every field hf_llama.c does not
 * implement is refused by name; the tensors must then have exactly the shapes it gives); anything else is
 * GPT-2, whose shape comes from the tensors (config.json optional, checked against them). Either way
 * model.* of -c CFG is replaced, and --set may not change the model (model.padded_vocab aside).
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
 * PeftModel.from_pretrained on the base; --merge writes the merged model (W + s (B A)^T) as a plain export instead.
 *
 * Fine-tuning from an import: give import the training config so the checkpoint stores it,
 *   ztrain import --safetensors gpt2/ --out ft/ckpt/step_00000000.h5 -c finetune.cfg
 *   ztrain train -c finetune.cfg --set checkpoint.dir=ft/ckpt --resume auto
 * (model.* in finetune.cfg is replaced by the tensors' shape; resume then finds the same config,
 * step 0 and zero moments, which is exactly a fresh start from these weights). */
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

static int plan_llama(export_plan *p, const zt_loaded_model *lm, const char *torch, char *err, size_t errlen) {
    const zt_param_table *pt = &lm->m.table;
    FILE *f = open_memstream(&p->config, &p->config_len);
    int bad = zt_hf_llama_config_out(f, lm->c, &lm->s, torch, err, errlen);
    fclose(f);
    p->map = zt_calloc((size_t)ZT_HF_MAX_PARTS * pt->n, sizeof *p->map);
    if (!bad) bad = (p->n = zt_hf_llama_map(pt, &lm->s, p->map, err, errlen)) < 0;
    if (bad) return 1;
    p->arch = zt_hf_llama_arch(lm->c->model.family);
    p->e = zt_calloc((size_t)p->n, sizeof *p->e);
    for (int i = 0; i < p->n; i++)
        p->e[i] = (zt_st_entry){p->map[i].name, p->map[i].ndim, {p->map[i].shape[0], p->map[i].shape[1]}};
    return 0;
}

/* the host buffers: the largest ztrain tensor, and (Llama) the largest transposed Hugging Face one */
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

/* the full model (GPT-2 or the Llama family) on rank 0: 0 or 1 with one line */
static int export_model(const zt_loaded_model *lm, const char *path, const char *out, const struct export_dtype *dt,
                        uint64_t max_shard, zt_dist *d, char *err, size_t errlen) {
    if (d->rank != 0) return 0;
    export_plan p = {0};
    const zt_model_shape *s = &lm->s;
    int bad = strcmp(lm->c->model.family, "gpt2") == 0 ? plan_gpt2(&p, lm, dt->torch, err, errlen)
                                                       : plan_llama(&p, lm, dt->torch, err, errlen);
    int n_files = 0;
    if (!bad) {
        plan_buffers(&p, lm);
        bad = write_plan(&p, out, dt, max_shard, &n_files, err, errlen);
    }
    char files[64];
    if (n_files > 1) snprintf(files, sizeof files, " (%d shards + model.safetensors.index.json)", n_files);
    else snprintf(files, sizeof files, "/model.safetensors");
    if (!bad)
        zt_log("exported %s (step %ld): %s, %d tensors, %zu params (vocab %d x %d) as %s -> %s%s + config.json\n",
               path, lm->step, p.arch, p.n, lm->m.table.total - (size_t)(s->padded_vocab - s->vocab_size) * s->n_embd *
               (lm->m.table.lm_head >= 0 ? 2 : 1), s->vocab_size, s->n_embd, zt_st_dtype_name(dt->st), out, files);
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
                          "Qwen2)", format);
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

/* ---------------------------------------------------------------- import: the source files */

#define MAX_SHARDS 64

typedef struct source {
    int n;
    zt_st_file f[MAX_SHARDS];
    char config_json[ZT_PATH_MAX + 64];  /* "" if none */
    char what[ZT_PATH_MAX];              /* for messages */
} source;

/* zt_st_open after the type check (a named pipe would block the open) */
static int st_open_checked(zt_st_file *f, const char *path, char *err, size_t errlen) {
    if (zt_check_input_file(path, "a safetensors file", err, errlen)) return 1;
    return zt_st_open(f, path, err, errlen);
}

static int open_index(source *src, const char *dir, const char *index, char *err, size_t errlen) {
    if (zt_check_input_file(index, "a model.safetensors.index.json file", err, errlen)) return 1;
    FILE *f = fopen(index, "rb");
    if (!f) return snprintf(err, errlen, "%s: cannot open: %s", index, strerror(errno)), 1;
    char *txt = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&txt, &len);
    char buf[65536];
    size_t k;
    while ((k = fread(buf, 1, sizeof buf, f)) > 0) fwrite(buf, 1, k, mem);
    fclose(f);
    fclose(mem);
    zt_json j;
    char jerr[256];
    int rc = zt_json_parse(txt, len, &j, jerr, sizeof jerr);
    free(txt);
    if (rc) return snprintf(err, errlen, "%s: not valid JSON (%s)", index, jerr), 1;
    const zt_json *wm = zt_json_get(&j, "weight_map");
    if (!wm || wm->type != ZT_JSON_OBJ) rc = snprintf(err, errlen, "%s: has no weight_map object", index) > 0;
    for (int i = 0; !rc && i < wm->n; i++) {
        const char *file = wm->items[i].type == ZT_JSON_STR ? wm->items[i].str : NULL;
        if (!file || strchr(file, '/')) { rc = snprintf(err, errlen, "%s: bad file name in weight_map", index) > 0; break; }
        char p[ZT_PATH_MAX + 300];
        snprintf(p, sizeof p, "%.*s/%.200s", ZT_PATH_MAX, dir, file);
        int seen = 0;
        for (int s = 0; s < src->n; s++) seen |= strcmp(src->f[s].path, p) == 0;
        if (seen) continue;
        if (src->n == MAX_SHARDS) { rc = snprintf(err, errlen, "%s: more than %d shard files", index, MAX_SHARDS) > 0; break; }
        char e[ZT_ERR_BUF];
        rc = st_open_checked(&src->f[src->n], p, e, sizeof e);
        if (rc) zt_errf(err, errlen, "import: %s names %.200s in its weight_map: %s", index, file, e);
        else src->n++;
    }
    zt_json_free(&j);
    return rc;
}

static int open_source(source *src, const char *arg, char *err, size_t errlen) {
    memset(src, 0, sizeof *src);
    snprintf(src->what, sizeof src->what, "%s", arg);
    struct stat st;
    if (stat(arg, &st) != 0) return snprintf(err, errlen, "import: %s: %s", arg, strerror(errno)), 1;
    if (zt_check_input_file_or_dir(arg, "a safetensors file or a directory holding model.safetensors", err, errlen))
        return 1;
    char dir[ZT_PATH_MAX + 1], p[ZT_PATH_MAX + 64];
    if (S_ISDIR(st.st_mode)) {
        snprintf(dir, sizeof dir, "%s", arg);
        snprintf(p, sizeof p, "%s/model.safetensors", dir);
        if (access(p, R_OK) == 0) {
            if (st_open_checked(&src->f[0], p, err, errlen)) return 1;
            src->n = 1;
        } else {
            snprintf(p, sizeof p, "%s/model.safetensors.index.json", dir);
            if (access(p, R_OK) != 0)
                return snprintf(err, errlen, "import: %s has no model.safetensors (nor a model.safetensors.index.json)",
                                arg), 1;
            if (open_index(src, dir, p, err, errlen)) return 1;
        }
    } else {
        char cp[ZT_PATH_MAX + 1];
        snprintf(cp, sizeof cp, "%s", arg);
        snprintf(dir, sizeof dir, "%s", dirname(cp));
        if (st_open_checked(&src->f[0], arg, err, errlen)) return 1;
        src->n = 1;
    }
    snprintf(p, sizeof p, "%s/config.json", dir);
    if (access(p, R_OK) == 0) {
        if (zt_check_input_file(p, "a Hugging Face config.json", err, errlen)) return 1;
        snprintf(src->config_json, sizeof src->config_json, "%s", p);
    }
    return 0;
}

static void close_source(source *src) {
    for (int i = 0; i < src->n; i++) zt_st_close(&src->f[i]);
}

/* the file tensor for a ztrain name (with or without "transformer.") */
static const zt_st_tensor *lookup(source *src, const char *name, zt_st_file **file) {
    char pn[160];
    snprintf(pn, sizeof pn, PREFIX "%s", name);
    for (int i = 0; i < src->n; i++) {
        const zt_st_tensor *t = zt_st_find(&src->f[i], pn);
        if (!t) t = zt_st_find(&src->f[i], name);
        if (t) { *file = &src->f[i]; return t; }
    }
    return NULL;
}

static const char *base_name(const char *n) { return strncmp(n, PREFIX, strlen(PREFIX)) == 0 ? n + strlen(PREFIX) : n; }

static int ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

/* ---------------------------------------------------------------- import: the model's shape */

typedef struct shape_in {
    int L, C, V, T, H;    /* H = 0: unknown */
} shape_in;

static int json_int(const zt_json *cj, const char *key, int *out) {
    const zt_json *v = zt_json_get(cj, key);
    if (!v || v->type != ZT_JSON_NUM || !v->is_int) return 0;
    *out = (int)v->inum;
    return 1;
}

/* shape from the tensors, n_head and consistency from config.json (cj; NULL: none) */
static int infer_shape(source *src, const zt_json *cj, shape_in *sh, char *err, size_t errlen) {
    memset(sh, 0, sizeof *sh);
    zt_st_file *f;
    const zt_st_tensor *wte = lookup(src, "wte.weight", &f), *wpe = lookup(src, "wpe.weight", &f);
    if (!wte && lookup(src, "model.embed_tokens.weight", &f))
        return zt_errf(err, errlen, "import: %s: a Llama-family model (model.embed_tokens.weight) needs its "
                       "config.json beside the tensors", src->what);
    if (!wte || !wpe || wte->ndim != 2 || wpe->ndim != 2)
        return snprintf(err, errlen, "import: %s: no 2-D wte.weight / wpe.weight: not a GPT-2 model", src->what), 1;
    sh->V = (int)wte->shape[0];
    sh->C = (int)wte->shape[1];
    sh->T = (int)wpe->shape[0];
    for (int i = 0; i < src->n; i++)
        for (int k = 0; k < src->f[i].n; k++) {
            int l;
            if (sscanf(base_name(src->f[i].t[k].name), "h.%d.", &l) == 1 && l + 1 > sh->L) sh->L = l + 1;
        }
    if (!cj) return 0;
    int rc = 0;
    const char *cjp = src->config_json;
    const zt_json *v;
    int x;
    if ((v = zt_json_get(cj, "model_type")) && v->type == ZT_JSON_STR && strcmp(v->str, "gpt2") != 0)
        rc = snprintf(err, errlen, "import: %s: model_type \"%s\": ztrain imports gpt2, llama, mistral and qwen2 "
                      "models", cjp, v->str);
    else if (!json_int(cj, "n_head", &sh->H) || sh->H < 1)
        sh->H = 0;
    static const struct { const char *key; size_t off; } same[] = {
        {"n_embd", offsetof(shape_in, C)}, {"n_layer", offsetof(shape_in, L)},
        {"vocab_size", offsetof(shape_in, V)}, {"n_positions", offsetof(shape_in, T)}};
    for (size_t i = 0; !rc && i < sizeof same / sizeof *same; i++) {
        int want = *(int *)((char *)sh + same[i].off);
        if (json_int(cj, same[i].key, &x) && x != want)
            rc = snprintf(err, errlen, "import: %s: %s = %d but the tensors have %d", cjp, same[i].key, x, want);
    }
    if (!rc && (v = zt_json_get(cj, "activation_function")) && v->type == ZT_JSON_STR &&
        strcmp(v->str, "gelu_new") && strcmp(v->str, "gelu_pytorch_tanh"))
        rc = snprintf(err, errlen, "import: %s: activation_function \"%s\": ztrain's GPT-2 uses gelu_new (tanh GELU)",
                      cjp, v->str);
    if (!rc && (v = zt_json_get(cj, "layer_norm_epsilon")) && v->type == ZT_JSON_NUM && fabs(v->num - 1e-5) > 1e-12)
        rc = snprintf(err, errlen, "import: %s: layer_norm_epsilon %g: ztrain's LayerNorm uses 1e-05", cjp, v->num);
    if (!rc && json_int(cj, "n_inner", &x) && x != 4 * sh->C)
        rc = snprintf(err, errlen, "import: %s: n_inner %d: ztrain's MLP is 4 x n_embd = %d", cjp, x, 4 * sh->C);
    if (!rc && (v = zt_json_get(cj, "scale_attn_by_inverse_layer_idx")) && v->type == ZT_JSON_BOOL && v->num)
        rc = snprintf(err, errlen, "import: %s: scale_attn_by_inverse_layer_idx = true is not supported", cjp);
    if (!rc && (v = zt_json_get(cj, "scale_attn_weights")) && v->type == ZT_JSON_BOOL && !v->num)
        rc = snprintf(err, errlen, "import: %s: scale_attn_weights = false is not supported", cjp);
    if (!rc && (v = zt_json_get(cj, "tie_word_embeddings")) && v->type == ZT_JSON_BOOL && !v->num)
        rc = snprintf(err, errlen, "import: %s: tie_word_embeddings = false: ztrain ties the LM head to wte", cjp);
    return rc != 0;
}

/* ---------------------------------------------------------------- import */

static void shape_str(int ndim, const int64_t *d, char *o, size_t n) {
    if (ndim == 1) snprintf(o, n, "(%lld)", (long long)d[0]);
    else if (ndim == 2) snprintf(o, n, "(%lld, %lld)", (long long)d[0], (long long)d[1]);
    else snprintf(o, n, "(%d dimensions)", ndim);
}

/* reads every table tensor into m->params (wte padded with zero rows); checks nothing is left */
static int fill_params(source *src, zt_model *m, zt_backend *be, char *err, size_t errlen) {
    const zt_param_table *pt = &m->table;
    size_t maxn = 1;
    for (int i = 0; i < pt->n; i++) if (pt->t[i].numel > maxn) maxn = pt->t[i].numel;
    float *host = zt_malloc(maxn * sizeof(float)), *lm = NULL;
    int rc = 0;
    for (int i = 0; i < pt->n && !rc; i++) {
        const zt_tensor_info *t = &pt->t[i];
        zt_st_file *f;
        const zt_st_tensor *st = lookup(src, t->name, &f);
        int64_t want[2] = {i == 0 ? m->s.vocab_size : t->shape[0], t->shape[1]};
        char ws[48], hs[48];
        shape_str(t->ndim, want, ws, sizeof ws);
        if (!st) { rc = snprintf(err, errlen, "import: %s: tensor %s is missing (shape %s)", src->what, t->name, ws); break; }
        if (st->ndim != t->ndim || st->shape[0] != want[0] || (t->ndim == 2 && st->shape[1] != want[1])) {
            shape_str(st->ndim, st->shape, hs, sizeof hs);
            rc = snprintf(err, errlen, "import: %s: tensor %s has shape %s but the model expects %s", f->path, st->name,
                          hs, ws);
            break;
        }
        if ((rc = zt_st_read_f32(f, st, host, err, errlen))) break;
        size_t n = (size_t)zt_st_numel(st);
        be->i->to_device(be, m->params + t->offset, host, n * sizeof(float));
        be->i->sync(be);
        if (i == 0) { lm = zt_malloc(n * sizeof(float)); memcpy(lm, host, n * sizeof(float)); }
    }
    /* every other tensor must be a known buffer or the tied head */
    for (int s = 0; s < src->n && !rc; s++)
        for (int k = 0; k < src->f[s].n && !rc; k++) {
            const zt_st_tensor *st = &src->f[s].t[k];
            const char *b = base_name(st->name);
            if (zt_param_find(pt, b) >= 0 || ends_with(b, ".attn.bias") || ends_with(b, ".attn.masked_bias")) continue;
            if (strcmp(st->name, "lm_head.weight") == 0 && lm) {
                size_t n = (size_t)m->s.vocab_size * m->s.n_embd;
                if (zt_st_numel(st) != n || (rc = zt_st_read_f32(&src->f[s], st, host, err, errlen))) {
                    if (!rc) rc = snprintf(err, errlen, "import: %s: lm_head.weight has another shape than wte.weight",
                                           src->f[s].path);
                } else if (memcmp(host, lm, n * sizeof(float)) != 0) {
                    rc = snprintf(err, errlen, "import: %s: lm_head.weight differs from wte.weight: ztrain ties the LM "
                                  "head to the embedding (untied heads are not supported)", src->f[s].path);
                }
                continue;
            }
            rc = snprintf(err, errlen, "import: %s: tensor %s is not part of a GPT-2 model with %d layers",
                          src->f[s].path, st->name, m->s.n_layer);
        }
    free(lm);
    free(host);
    return rc != 0;
}

/* Llama family: every table tensor from its Hugging Face parts (zero padding rows), then the files' other tensors */
static int fill_llama(source *src, zt_model *m, zt_backend *be, const char *family, char *err, size_t errlen) {
    const zt_param_table *pt = &m->table;
    zt_hf_map *map = zt_calloc((size_t)ZT_HF_MAX_PARTS * pt->n, sizeof *map);
    const int nmap = zt_hf_llama_map(pt, &m->s, map, err, errlen);
    size_t maxn = 1;
    for (int i = 0; i < pt->n; i++) if (pt->t[i].numel > maxn) maxn = pt->t[i].numel;
    float *dst = zt_malloc(maxn * sizeof(float)), *tmp = zt_malloc(maxn * sizeof(float)), *wte = NULL;
    int rc = nmap < 0;
    for (int i = 0; i < pt->n && !rc; i++) {
        if ((rc = zt_hf_llama_gather(src->f, src->n, map, nmap, pt, i, dst, tmp, err, errlen))) break;
        be->i->to_device(be, m->params + pt->t[i].offset, dst, pt->t[i].numel * sizeof(float));
        be->i->sync(be);
        if (i == ZT_P_WTE && m->s.tied) { /* a tied model's lm_head.weight, if the files have one, must equal it */
            wte = zt_malloc(pt->t[i].numel * sizeof(float));
            memcpy(wte, dst, pt->t[i].numel * sizeof(float));
        }
    }
    if (!rc) rc = zt_hf_llama_check_rest(src->f, src->n, map, nmap, &m->s, wte, zt_hf_llama_arch(family), err, errlen);
    free(wte);
    free(tmp);
    free(dst);
    free(map);
    return rc != 0;
}

static int set_given(const zt_cli *cli, const char *key) {
    size_t n = strlen(key);
    for (int i = 0; i < cli->n_sets; i++)
        if (strncmp(cli->sets[i], key, n) == 0 && cli->sets[i][n] == '=') return 1;
    return 0;
}

/* model.* of GPT-2 tensors: the shape they and config.json give, GPT-2's description (whatever -c CFG had) */
static int gpt2_config(zt_config *c, const zt_cli *cli, const shape_in *sh, const char *in, char *err, size_t errlen) {
    static const char *const desc[] = {"model.family=gpt2", "model.n_kv_head=0", "model.intermediate_size=0",
                                       "model.norm=auto", "model.position=auto", "model.mlp=auto", "model.bias=auto",
                                       "model.tie_embeddings=auto", "model.norm_eps=0", "model.rope_theta=0",
                                       "model.rope_scaling=none"};
    for (size_t i = 0; i < sizeof desc / sizeof *desc; i++)
        if (zt_config_set(c, desc[i], err, errlen)) return 1;
    c->model.n_layer = sh->L;
    c->model.n_embd = sh->C;
    c->model.vocab_size = sh->V;
    c->model.block_size = sh->T;
    if (sh->H) c->model.n_head = sh->H;
    else if (!cli->config_path && !set_given(cli, "model.n_head"))
        return zt_errf(err, errlen, "import: %s: the tensors do not tell model.n_head: put the model's config.json "
                       "beside them, or pass --set model.n_head=N (or -c CFG)", in);
    return 0;
}

/* config.json beside the tensors, parsed (cj->type NULL when there is none); 0 or 1 with one line */
static int read_config_json(const source *src, zt_json *cj, char *err, size_t errlen) {
    memset(cj, 0, sizeof *cj);
    if (!src->config_json[0]) return 0;
    size_t len = 0;
    char jerr[256], *txt = zt_read_file(src->config_json, "a Hugging Face config.json", &len, err, errlen);
    if (!txt) return 1;
    int rc = zt_json_parse(txt, len, cj, jerr, sizeof jerr);
    free(txt);
    if (rc) return zt_errf(err, errlen, "import: %s: not valid JSON (%s)", src->config_json, jerr);
    return 0;
}

/* the checkpoint's config: CFG (or the defaults), model.* from the files, then --set, which may not change the model
   the files give (only its padding, model.padded_vocab, and GPT-2's n_head when nothing else names it) */
static zt_config *import_config(const zt_cli *cli, const char *in, source *src, const zt_json *cj, const char *family) {
    char err[ZT_ERR_BUF] = "";
    zt_config *c = zt_calloc(1, sizeof *c), *probe = zt_malloc(sizeof *probe);
    shape_in sh = {0};
    int bad = 0;
    if (cli->config_path) bad = zt_config_load(c, cli->config_path, 0, NULL, err, sizeof err);
    else zt_config_defaults(c);
    if (bad) zt_user_error_all("%s", err);
    if (family) bad = zt_hf_llama_config_in(cj, src->config_json, family, c, err, sizeof err);
    else bad = infer_shape(src, cj->type == ZT_JSON_OBJ ? cj : NULL, &sh, err, sizeof err) ||
               gpt2_config(c, cli, &sh, in, err, sizeof err);
    zt_check_all(bad, err, sizeof err);
    if (c->model.padded_vocab && c->model.padded_vocab < c->model.vocab_size) c->model.padded_vocab = 0;
    if (c->train.seq_len > c->model.block_size) c->train.seq_len = c->model.block_size;
    const int heads_known = family || sh.H;
    *probe = *c;
    if (!heads_known) probe->model.n_head = 1;
    zt_model_shape s0, s1; /* zt_config_shape zeroes them first: memcmp sees no stray padding */
    if (zt_config_shape(probe, &s0, err, sizeof err))
        zt_user_error_all("import: %s: a model ztrain cannot build: %s", family ? src->config_json : in, err);
    for (int i = 0; i < cli->n_sets && !bad; i++) bad = zt_config_set(c, cli->sets[i], err, sizeof err);
    if (!bad) bad = zt_config_validate(c, 1, err, sizeof err);
    if (bad) zt_user_error_all("%s", err);
    zt_config_shape(c, &s1, err, sizeof err);
    s0.padded_vocab = s1.padded_vocab;
    if (!heads_known) s0.n_head = s1.n_head, s0.n_kv_head = s1.n_kv_head;
    if (memcmp(&s0, &s1, sizeof s0) != 0)
        zt_user_error_all("import: --set changes the model the files give (%s: n_layer %d, n_head %d, n_kv_head %d, "
                          "n_embd %d, vocab_size %d, block_size %d%s): only model.padded_vocab may be set",
                          c->model.family, s0.n_layer, s0.n_head, s0.n_kv_head, s0.n_embd, s0.vocab_size, s0.block_size,
                          heads_known ? "" : "; n_head from you");
    free(probe);
    return c;
}

/* each rank writes its shard of the parameters and zero moments to out (via out.tmp) */
static void write_import(const zt_config *c, zt_model *m, zt_backend *be, const zt_shard_layout *sl, zt_dist *d,
                         const char *out) {
    char err[ZT_ERR_BUF] = "";
    zt_ckpt_view v = zt_model_ckpt_view(m);
    v.lo = zt_shard_lo(sl, d->rank);
    v.hi = v.lo + sl->shard;
    v.optim_base = v.lo;
    v.optim_elems = sl->shard;
    v.exp_avg = be->i->alloc(be, sl->shard * sizeof(float));
    v.exp_avg_sq = be->i->alloc(be, sl->shard * sizeof(float));
    size_t tl = zt_config_to_string(c, NULL, 0);
    char *text = zt_malloc(tl + 1);
    zt_config_to_string(c, text, tl + 1);
    zt_ckpt_meta meta = {0};
    meta.world_size = d->size;
    meta.loss_scale = 1.0f;
    meta.seed = (uint64_t)c->train.seed;
    meta.config_text = text;
    char tmp[ZT_PATH_MAX + 16], parent[ZT_PATH_MAX + 1];
    snprintf(tmp, sizeof tmp, "%s.tmp", out);
    snprintf(parent, sizeof parent, "%s", out);
    char *pd = dirname(parent);
    int bad = 0;
    if (d->rank == 0 && zt_mkdirs(pd) != 0)
        bad = zt_errf(err, sizeof err, "import: %s: cannot create: %s", pd, strerror(errno));
    zt_check_all(bad, err, sizeof err);
    if (zt_ckpt_write(tmp, &meta, &v, err, sizeof err)) {
        if (d->rank == 0) unlink(tmp);
        zt_user_error_all("%s", err);
    }
    if (d->rank == 0 && rename(tmp, out) != 0) {
        bad = zt_errf(err, sizeof err, "import: cannot rename %s to %s: %s", tmp, out, strerror(errno));
        unlink(tmp);
    }
    zt_check_all(bad, err, sizeof err);
    free(text);
    be->i->free(be, v.exp_avg);
    be->i->free(be, v.exp_avg_sq);
}

int zt_cmd_import(int argc, char **argv, zt_dist *d) {
    char err[ZT_ERR_BUF] = "";
    const char *in = NULL, *out = NULL, *family = NULL;
    zt_cli_opt opts[] = {{"--safetensors", 1, &in}, {"--out", 1, &out}};
    zt_cli cli;
    if (zt_cli_parse(&cli, argc, argv, opts, 2, err, sizeof err)) zt_user_error_all("%s", err);
    if (!in || !out) zt_user_error_all("import: needs --safetensors FILE_OR_DIR and --out CKPT.h5");
    struct stat ost;
    if (stat(out, &ost) == 0 && !S_ISREG(ost.st_mode))
        zt_user_error_all("import: --out %s: %s (expected the path of the checkpoint file to write, e.g. "
                          "%s/step_00000000.h5)", out, zt_file_kind((unsigned)ost.st_mode), out);
    source *src = zt_calloc(1, sizeof *src);
    zt_json cj;
    int bad = open_source(src, in, err, sizeof err);
    if (!bad) bad = read_config_json(src, &cj, err, sizeof err);
    if (!bad && cj.type == ZT_JSON_OBJ) bad = zt_hf_llama_family(&cj, src->config_json, &family, err, sizeof err) < 0;
    zt_check_all(bad, err, sizeof err);
    zt_config *c = import_config(&cli, in, src, &cj, family);
    zt_json_free(&cj);

    /* the model, with the shard padding of this rank count */
    zt_model_shape s;
    zt_model_shape_from_config(c, &s);
    zt_param_table *pt = zt_malloc(sizeof *pt);
    zt_param_table_build(pt, &s);
    const zt_shard_layout sl = zt_shard_layout_of(pt->total, d->size);
    free(pt);
    zt_backend *be = zt_backend_create(c->device, 1, err, sizeof err);
    if (!be) zt_user_error_all("%s", err);
    zt_model m;
    zt_model_init(&m, be, &s, 1, 1, sl.padded, 0, NULL);
    bad = family ? fill_llama(src, &m, be, family, err, sizeof err) : fill_params(src, &m, be, err, sizeof err);
    zt_check_all(bad, err, sizeof err);
    write_import(c, &m, be, &sl, d, out);
    if (family)
        zt_log("imported %s: %s n_layer %d, n_head %d, n_kv_head %d, n_embd %d, intermediate %d, vocab %d (padded %d), "
               "block %d, %s LM head%s, %zu params -> %s (step 0, zero optimizer state)\n", in,
               zt_hf_llama_arch(family), s.n_layer, s.n_head, s.n_kv_head, s.n_embd, s.ffn, s.vocab_size,
               s.padded_vocab, s.block_size, s.tied ? "tied" : "separate",
               s.rope_factor > 0 ? ", llama3 rope scaling" : "", m.table.total, out);
    else
        zt_log("imported %s: GPT-2 n_layer %d, n_head %d, n_embd %d, vocab %d (padded %d), block %d, %zu params -> %s "
               "(step 0, zero optimizer state)\n", in, s.n_layer, s.n_head, s.n_embd, s.vocab_size, s.padded_vocab,
               s.block_size, m.table.total, out);
    zt_model_free(&m);
    zt_backend_destroy(be);
    close_source(src);
    free(src);
    free(c);
    return 0;
}
