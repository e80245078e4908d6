/* prepare_sft.h — `ztrain prepare --sft`: fine-tuning examples as padded token sequences with a loss mask.
 *
 *   ztrain prepare --sft --input FILE.jsonl[.gz|.zst] [--input ...] --tokenizer PATH --seq-len T --out-dir DIR
 *                  [--template none|chatml|llama2|llama3] [--prompt-field prompt] [--response-field response]
 *                  [--messages-field messages] [--val-fraction F] [--truncate right|left|drop] [--merges PATH]
 *
 * Each non-blank line of an input is one example: {"messages": [{"role": "system"|"user"|"assistant",
 * "content": "..."}, ...]} (a chat), or {"prompt": "...", "response": "..."} (one user turn and one assistant
 * turn). The template renders it as transformers' apply_chat_template does with the real models' templates
 * (chatml: Qwen2's without its default system message, llama2: Llama 2 chat's, llama3: Llama 3 Instruct's;
 * none: prompt and response as one text framed like a `prepare` document, then the end-of-text token). Text is
 * tokenized segment by segment between the template's special tokens, as Hugging Face tokenizes the rendered
 * string; the special tokens are written as their ids (they must be added tokens of the tokenizer).
 * Mask: 1 on the tokens of the assistant turns (their content and the turn's end token: <|im_end|>,
 * <|eot_id|>, </s>; for none the response and the end-of-text token), 0 elsewhere; a token that holds bytes of
 * both gets 1; the first token of an example is never a target and gets 0.
 * Each example becomes exactly L = T + 1 tokens: longer ones are cut (right: the end; left: the start) or
 * dropped, shorter ones padded at the end with the end-of-text id, mask 0. DIR/train.bin and DIR/val.bin are
 * shards of examples with a mask (data_shard.h, example length L); validation is the last floor(n F) examples of
 * each input (F = --val-fraction, default 0.05). Also DIR/tokenizer.zttok. All written as .tmp and renamed at
 * the end: a failed run leaves DIR as it was. One process (under mpirun, ranks other than 0 do nothing).
 * Returns the exit code: 0, or 2 after one line "ztrain: error: ..." (an example's error names FILE:LINE).
 */
#ifndef ZT_PREPARE_SFT_H
#define ZT_PREPARE_SFT_H

/* whether the arguments ask for --sft (anywhere after argv[0]) */
int zt_prepare_sft_wanted(int argc, char **argv);
/* argv[0] is the command name ("prepare"); the options follow (--sft among them) */
int zt_prepare_sft(int argc, char **argv);

#endif
