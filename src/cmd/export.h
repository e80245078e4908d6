/* export.h — `ztrain export` and `ztrain import`: ztrain checkpoints <-> Hugging Face safetensors +
 * config.json: GPT2LMHeadModel (transformer.* names, Conv1D (in, out) layouts, tied LM head) and the
 * Llama family, LlamaForCausalLM, MistralForCausalLM and Qwen2ForCausalLM (cmd/hf_llama.h). */
#ifndef ZT_EXPORT_H
#define ZT_EXPORT_H

#include "core/dist/dist.h"

/* ztrain export --checkpoint PATH [--format safetensors] --out DIR [--dtype fp32|bf16|fp16]
                 [--max-shard-size SIZE]
   writes DIR/model.safetensors (F32, or BF16 / F16 rounded to nearest even; the embedding and an untied
   LM head cut to the V real rows) and DIR/config.json (the model.family's class: GPT2Config, LlamaConfig,
   MistralConfig or Qwen2Config; torch_dtype float32 / bfloat16 / float16), loadable by transformers'
   AutoModelForCausalLM.from_pretrained(DIR). Over SIZE bytes (default 5GB, as save_pretrained) the tensors
   go to model-0000k-of-0000n.safetensors shards + model.safetensors.index.json. fp16 refuses a weight with
   |x| >= 65520 (it would be Inf), naming the tensor and value, and a description the class cannot hold is
   refused naming its model.* key, both before DIR is touched. */
int zt_cmd_export(int argc, char **argv, zt_dist *d);

/* ztrain import --safetensors FILE_OR_DIR --out CKPT.h5 [-c CFG] [--set key=value ...]
   reads Hugging Face safetensors (F32, F16, BF16, F64; a directory may hold model.safetensors or a sharded
   model.safetensors.index.json, and config.json): GPT-2 (names with or without "transformer."), or, when
   config.json's model_type / architectures say so, a Llama, Mistral or Qwen2 model (config.json required;
   a field ztrain does not implement is refused by name), and writes a ztrain checkpoint at step 0 with zero
   Adam moments. The checkpoint's config is CFG (or the defaults) with model.* taken from the files, then the
   --set overrides, which may not change the model (model.padded_vocab aside). Every refusal is one line and
   exit 2, with CKPT.h5 not written. */
int zt_cmd_import(int argc, char **argv, zt_dist *d);

#endif
