/* prepare_sft_internal.h — what the files of `ztrain prepare --sft` share (nothing else includes it):
 *   prepare_sft.c         options, inputs (JSON Lines, plain / gzip / zstd), examples, padding, outputs
 *   prepare_sft_render.c  the chat templates: an example's messages to token ids and loss mask
 */
#ifndef ZT_PREPARE_SFT_INTERNAL_H
#define ZT_PREPARE_SFT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "io/tokenizer.h"

typedef enum { SFT_TPL_NONE = 0, SFT_TPL_CHATML = 1, SFT_TPL_LLAMA2 = 2, SFT_TPL_LLAMA3 = 3 } sft_template;
typedef enum { SFT_SYSTEM = 0, SFT_USER = 1, SFT_ASSISTANT = 2 } sft_role;

extern const char *const SFT_TEMPLATE_NAMES[4];
extern const char *const SFT_ROLE_NAMES[3];

/* one message: its content's bytes (valid UTF-8) */
typedef struct sft_msg {
    sft_role role;
    const uint8_t *text;
    size_t len;
} sft_msg;

typedef struct sft_renderer sft_renderer;

/* tok: the tokenizer (kept, not freed); plain: the same tokenizer without a prefix space, for text that does not
   start the rendered string when tok's prefix is "first" (else NULL; freed by sft_renderer_free). Looks up the
   template's special tokens among tok's added tokens: NULL with one line in err naming a missing one. */
sft_renderer *sft_renderer_create(zt_tokenizer *tok, zt_tokenizer *plain, sft_template tpl, char *err,
                                  size_t errlen);
void sft_renderer_free(sft_renderer *r);
/* renders one example: 0 with *ids and *mask (n entries, valid until the next call), or -1 with what is wrong
   with the example in err (no file or line: the caller adds them). Template none takes exactly one user message
   (the prompt) and one assistant message (the response). */
int sft_render(sft_renderer *r, const sft_msg *m, int n_msgs, const uint32_t **ids, const uint8_t **mask,
               size_t *n, char *err, size_t errlen);

#endif
