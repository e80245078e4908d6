/* sample.h — the `sample` command: text from a checkpoint through the KV-cached sampler
 * (core/model/sampler.h). */
#ifndef ZT_SAMPLE_H
#define ZT_SAMPLE_H

#include "core/dist/dist.h"

/* `ztrain sample --checkpoint PATH|DIR --prompt TEXT --tokens N --temperature T --top-k K --seed S
   [--tokenizer PATH] [--threads N]`. Every rank loads the checkpoint (collective), rank 0
   generates and streams the text to stdout; tokens/s at the end on stderr. A directory means its
   newest complete checkpoint. The tokenizer is the checkpoint config's data.tokenizer unless given
   ("none": no tokenizer); without one the prompt is a list of token ids ("1 2 3" or "1,2,3") and
   ids are printed. Unset options come from the checkpoint config's sample.* keys; an empty prompt
   starts from end-of-text (the tokenizer's eot id, or vocab_size-1 without a tokenizer). */
int zt_cmd_sample(int argc, char **argv, zt_dist *d);


#endif
