/* export.h — `ztrain export` and `ztrain import`: ztrain checkpoints <-> Hugging Face GPT-2
 * safetensors (transformer.* names, Conv1D (in, out) layouts, tied LM head) + config.json. */
#ifndef ZT_EXPORT_H
#define ZT_EXPORT_H

#include "core/dist/dist.h"

/* ztrain export --checkpoint PATH [--format safetensors] --out DIR [--dtype fp32|bf16|fp16]
   writes DIR/model.safetensors (F32, or BF16 / F16 rounded to nearest even; wte cut to the V real
   rows) and DIR/config.json (GPT2Config, torch_dtype float32 / bfloat16 / float16), loadable by
   transformers' GPT2LMHeadModel.from_pretrained(DIR). fp16 refuses a weight with |x| >= 65520 (it
   would be Inf), naming the tensor and value, before --out is touched. */
int zt_cmd_export(int argc, char **argv, zt_dist *d);

/* ztrain import --safetensors FILE_OR_DIR --out CKPT.h5 [-c CFG] [--set key=value ...]
   reads GPT-2 safetensors (names with or without "transformer."; F32, F16, BF16, F64; a directory
   may hold model.safetensors or a sharded model.safetensors.index.json, and config.json), and
   writes a ztrain checkpoint at step 0 with zero Adam moments. The checkpoint's config is CFG
   (or the defaults) with model.* taken from the tensors and config.json, then the --set overrides. */
int zt_cmd_import(int argc, char **argv, zt_dist *d);

#endif
