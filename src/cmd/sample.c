/* sample.c — the `sample` command (sample.h) over the sampler of core/model/sampler.h. */
#include "cmd/sample.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "cmd/cli.h"
#include "core/model/model_load.h"
#include "core/model/sampler.h"
#include "io/ckpt.h"
#include "io/metrics.h"
#include "io/tokenizer.h"
#include "util/util.h"

/* ---------------------------------------------------------------- `ztrain sample` */

typedef struct stream_ctx {
    zt_tokenizer *tok;
    double t_first;     /* when the first new token was chosen (the prompt is done) */
    int n;
} stream_ctx;

static void on_stream(void *p, int32_t id) {
    stream_ctx *s = p;
    if (s->n++ == 0) s->t_first = zt_now();
    if (s->tok) {
        size_t len = 0;
        const uint8_t *b = zt_tokenizer_token(s->tok, (uint32_t)id, &len);
        if (len) fwrite(b, 1, len, stdout);
    } else {
        printf(" %d", id);
    }
    fflush(stdout);
}

static int parse_num(const char *opt, const char *s, double lo, double hi, int integer, double *out, char *err,
                     size_t errlen) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end || errno || !(v >= lo && v <= hi) || (integer && v != floor(v))) {
        snprintf(err, errlen, "%s %s: expected %s in [%.15g, %.15g]", opt, s, integer ? "an integer" : "a number", lo, hi);
        return 1;
    }
    *out = v;
    return 0;
}

/* ranks other than 0 wait here without spinning a core while rank 0 generates */
static void quiet_barrier(void) {
    MPI_Request req;
    MPI_Ibarrier(MPI_COMM_WORLD, &req);
    int done = 0;
    struct timespec ts = {0, 2000000};
    for (;;) {
        MPI_Test(&req, &done, MPI_STATUS_IGNORE);
        if (done) break;
        nanosleep(&ts, NULL);
    }
}

int zt_cmd_sample(int argc, char **argv, zt_dist *d) {
    char err[ZT_ERR_BUF] = "";
    const char *ck_s = NULL, *prompt_s = NULL, *tokens_s = NULL, *temp_s = NULL, *topk_s = NULL, *seed_s = NULL,
               *tok_s = NULL, *threads_s = NULL;
    zt_cli_opt opts[] = {{"--checkpoint", 1, &ck_s}, {"--prompt", 1, &prompt_s},   {"--tokens", 1, &tokens_s},
                         {"--temperature", 1, &temp_s}, {"--top-k", 1, &topk_s},   {"--seed", 1, &seed_s},
                         {"--tokenizer", 1, &tok_s},    {"--threads", 1, &threads_s}};
    zt_cli cli;
    if (zt_cli_parse(&cli, argc, argv, opts, (int)(sizeof opts / sizeof *opts), err, sizeof err))
        zt_user_error_all("%s", err);
    if (cli.config_path || cli.n_sets)
        zt_user_error_all("sample takes its model and config from the checkpoint: use --checkpoint PATH (no -c/--set)");
    if (!ck_s) zt_user_error_all("sample: --checkpoint PATH (a checkpoint file or a checkpoint directory) is required");
    double v_tokens = 0, v_temp = 0, v_topk = 0, v_seed = 0, v_threads = 0;
    if ((tokens_s && parse_num("--tokens", tokens_s, 1, 1 << 24, 1, &v_tokens, err, sizeof err)) ||
        (temp_s && parse_num("--temperature", temp_s, 0, 100, 0, &v_temp, err, sizeof err)) ||
        (topk_s && parse_num("--top-k", topk_s, 0, 1 << 24, 1, &v_topk, err, sizeof err)) ||
        (seed_s && parse_num("--seed", seed_s, 0, 9007199254740992.0, 1, &v_seed, err, sizeof err)) ||
        (threads_s && parse_num("--threads", threads_s, 1, 4096, 1, &v_threads, err, sizeof err)))
        zt_user_error_all("%s", err);

    /* which file: a directory means its newest complete checkpoint (rank 0 decides for all) */
    char path[ZT_PATH_MAX + 128];
    snprintf(path, sizeof path, "%s", ck_s);
    struct stat st;
    /* the type first: a named pipe would block the checkpoint's open */
    int bad = zt_check_input_file_or_dir(ck_s, "a ztrain checkpoint (.h5) or a directory of them", err, sizeof err);
    if (!bad && tok_s && strcmp(tok_s, "none") != 0)
        bad = zt_check_input_file(tok_s, "a tokenizer file: .zttok, tokenizer.json or vocab.json", err, sizeof err);
    zt_check_all(bad, err, sizeof err);
    if (d->rank == 0 && stat(ck_s, &st) == 0 && S_ISDIR(st.st_mode) && zt_ckpt_find_latest(ck_s, path, sizeof path)) {
        snprintf(err, sizeof err, "%s: no complete checkpoint in this directory", ck_s);
        bad = 1;
    }
    zt_check_all(bad, err, sizeof err);
    MPI_Bcast(path, sizeof path, MPI_CHAR, 0, MPI_COMM_WORLD);

    const int threads = threads_s ? (int)v_threads : zt_dist_default_threads(d);
    const zt_load_opts lo = {NULL, NULL, 0, threads, 1, 1};
    zt_loaded_model lm;
    zt_loaded_model_open(&lm, path, &lo);
    const zt_config *c = lm.c;
    const zt_model_shape s = lm.s;
    if (s.encoder)
        zt_user_error_all("%s: model.family = %s is an encoder (a masked language model): it does not generate text "
                          "(ztrain eval scores it)", path, c->model.family);
    zt_backend *be = lm.be;
    const long step = lm.step;

    /* rank 0: tokenizer and prompt */
    const char *tok_path = tok_s ? tok_s : c->data.tokenizer;
    if (strcmp(tok_path, "none") == 0) tok_path = "";
    zt_tokenizer *tok = NULL;
    int32_t *prompt = NULL;
    int n_prompt = 0;
    const char *prompt_text = prompt_s ? prompt_s : c->sample.prompt;
    bad = 0;
    if (d->rank == 0) {
        if (tok_path[0] && (zt_check_input_file(tok_path, "a tokenizer file (data.tokenizer of the checkpoint's config, "
                                                "or --tokenizer PATH|none)", err, sizeof err) ||
                            !(tok = zt_sampler_load_tokenizer(tok_path, s.vocab_size, err, sizeof err))))
            bad = 1;
        if (!bad && (n_prompt = zt_sampler_prompt_ids(tok, prompt_text, s.vocab_size, &prompt, err, sizeof err)) < 0) bad = 1;
        if (!bad && n_prompt == 0) {
            snprintf(err, sizeof err, "--prompt '%.200s' encodes to no tokens", prompt_text);
            bad = 1;
        }
    }
    if (!be->i->attention_decode)
        bad = zt_errf(err, sizeof err, "sample: device = \"%s\" cannot decode (its backend has no attention_decode)",
                      c->device);
    zt_check_all(bad, err, sizeof err);

    if (d->rank == 0) {
        const int n_new = tokens_s ? (int)v_tokens : c->sample.tokens;
        const float temperature = temp_s ? (float)v_temp : (float)c->sample.temperature;
        const int top_k = topk_s ? (int)v_topk : c->sample.top_k;
        const uint64_t seed = seed_s ? (uint64_t)v_seed : (uint64_t)c->train.seed;
        zt_sampler *sp = zt_sampler_create(be, &s);
        stream_ctx sc = {tok, 0, 0};
        if (tok) fputs(prompt_text, stdout);
        else
            for (int i = 0; i < n_prompt; i++) printf("%s%d", i ? " " : "", prompt[i]);
        fflush(stdout);
        double t0 = zt_now();
        int rc = zt_sampler_generate(sp, lm.m.params, prompt, n_prompt, n_new, temperature, top_k, seed, NULL, on_stream,
                                     &sc);
        double t1 = zt_now();
        ZT_ASSERT(rc == n_new);
        printf("\n");
        /* only rank 0 writes (the others wait in quiet_barrier): a failed write ends them through MPI */
        if (fflush(stdout) != 0 || ferror(stdout))
            zt_user_error("sample: cannot write the generated text to stdout: %s", strerror(errno));
        /* the first token comes after the prompt's pass; the rest each cost one decode step */
        double gen_s = t1 - sc.t_first, pre_s = sc.t_first - t0;
        fprintf(stderr,
                "ztrain sample: %s (step %ld, %zu params, %d thread%s): prompt %d tokens in %.3f s; %d tokens "
                "generated in %.3f s: %.1f tokens/s\n",
                path, step, lm.m.table.total, threads, threads == 1 ? "" : "s", n_prompt, pre_s, n_new, t1 - t0,
                gen_s > 0 && n_new > 1 ? (n_new - 1) / gen_s : n_new / (t1 - t0));
        zt_sampler_free(sp);
    }
    quiet_barrier();
    free(prompt);
    zt_tokenizer_free(tok);
    zt_loaded_model_close(&lm);
    return 0;
}

