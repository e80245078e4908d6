/* sampler.h — text generation with a KV cache: the sampler object, prompts, and the short samples
 * printed during training (the `sample` command is cmd/sample.c).
 *
 * Decoding. Each token (prompt tokens included) goes through the model once, alone: embedding,
 * then per layer LN -> qkv -> attention_decode (appends this token's k, v to the layer's caches
 * (block_size, C) and attends over the positions so far) -> proj -> residual -> LN -> MLP ->
 * residual, then ln_f and the tied LM head: the forward's ops on one row, except that the linear
 * layers and the head use the backend's one-row product (`gemv`, when it has one) instead of a
 * 1-row BLAS call that would pack every weight matrix per token. So the logits equal those of
 * zt_model_forward at the same position up to the summation order of those products
 * (tests/unit/core/model/test_decode.c: |diff| <= 1e-5 x max(1, |logit|); bitwise equal without gemv).
 *
 * Sampling. Only the first vocab_size logits are candidates: padded vocab rows are never sampled.
 * top_k 0 = all tokens, 1 = greedy (argmax, the lowest id on ties; temperature and seed unused);
 * temperature <= 0 also means greedy. Otherwise the k largest logits (ties: lower id first) divided
 * by the temperature go through a softmax in double and one zt_rng_uniform draw per token picks
 * one: the same seed gives the same tokens on any machine that computes the same logits.
 *
 * Context longer than block_size. Learned position embeddings stop at block_size, so when the
 * cache is full the window slides: the last block_size/2 tokens are re-run from position 0 (their
 * logits are discarded) and generation continues from there. A prompt longer than block_size
 * keeps only its last block_size tokens.
 */
#ifndef ZT_SAMPLER_H
#define ZT_SAMPLER_H

#include <stddef.h>
#include <stdint.h>

#include "iface/backend.h"
#include "io/config.h"
#include "io/tokenizer.h"
#include "core/model/model.h"

typedef struct zt_sampler zt_sampler;

/* caches for block_size positions (2 x L x block_size x C floats), one-token activations and the
   host logits: everything allocated once, here. NULL when the backend has no attention_decode
   (an optional slot). */
/* the bytes zt_sampler_create allocates (KV caches, one token's activations, host buffers) */
size_t zt_sampler_bytes(const zt_model_shape *s);
zt_sampler *zt_sampler_create(zt_backend *be, const zt_model_shape *s);
void zt_sampler_free(zt_sampler *sp);

/* Low level: runs token tok at position pos (0 <= pos < block_size; positions 0..pos-1 must have
   been run since the last pos 0) and returns the host logits (padded_vocab floats, valid until the
   next call). params: device flat buffer in the table order of model.h. */
const float *zt_sampler_step(zt_sampler *sp, const float *params, int32_t tok, int pos);

/* Generates n_new tokens after prompt[0..n_prompt) (n_prompt >= 1; ids < vocab_size). Tokens go to
   out_tokens (may be NULL) and, one at a time as they are chosen, to on_token (may be NULL).
   Returns the number generated (n_new), or -1 on bad input. */
int zt_sampler_generate(zt_sampler *sp, const float *params, const int32_t *prompt, int n_prompt, int n_new,
                        float temperature, int top_k, uint64_t seed, int32_t *out_tokens,
                        void (*on_token)(void *ctx, int32_t tok), void *ctx);
/* the number of tokens run through the model by the last generate (prompt, slides included) */
long zt_sampler_tokens_run(const zt_sampler *sp);

/* ---- prompts ---- */

/* loads a tokenizer and checks its vocab against the model's V; NULL with err on failure */
zt_tokenizer *zt_sampler_load_tokenizer(const char *path, int V, char *err, size_t errlen);
/* the prompt as ids: encoded text with a tokenizer, a list of ids ("1 2 3") without; "" = the tokenizer's encoding
   of "" when it frames text with BOS (Llama), else end-of-text.
   Returns the count (*out malloc'd) or -1 with err. */
int zt_sampler_prompt_ids(zt_tokenizer *tok, const char *text, int V, int32_t **out, char *err, size_t errlen);

/* ---- samples during training (rank 0) ---- */
struct zt_metrics;
typedef struct zt_train_sample zt_train_sample;
/* Call on every rank after the model is set up. On rank 0 (active != 0) with sample.every > 0 it
   loads data.tokenizer (if set; its vocab must match the model's) and allocates a sampler;
   elsewhere *out = NULL. Returns non-zero with one line in err on a user error (pass it to
   zt_check_all so every rank exits). */
int zt_train_sample_create(zt_train_sample **out, zt_backend *be, const zt_model_shape *s, const zt_config *c,
                           int active, char *err, size_t errlen);
/* sample.tokens tokens from sample.prompt with sample.temperature / top_k and seed train.seed + step;
   printed through zt_metrics_note and appended to samples.txt in the run directory. ts may be NULL. */
void zt_sample_during_training(zt_train_sample *ts, struct zt_metrics *mx, const float *params, long step);
void zt_train_sample_free(zt_train_sample *ts);

#endif
