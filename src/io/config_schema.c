/* config_schema.c — the ONE table of configuration keys (cfg_schema[]): dotted name, type, field offset, default,
 * range or allowed values and a one-line help for every key. config.c parses, checks and prints through it;
 * config_derive.c says what the values mean together. */
#include "io/config.h"
#include "io/config_internal.h"
#include "iface/param_table.h"

#include <stddef.h>

#define FLD(m) offsetof(zt_config, m), sizeof(((zt_config *)0)->m)
#define INT(k, m, d, lo, hi, h) { k, K_INT, FLD(m), d, NULL, lo, hi, 0, NULL, h }
#define LONG(k, m, d, lo, hi, h) { k, K_LONG, FLD(m), d, NULL, lo, hi, 0, NULL, h }
#define FLT(k, m, d, lo, hi, fl, h) { k, K_FLOAT, FLD(m), d, NULL, lo, hi, fl, NULL, h }
#define BOOL(k, m, d, h) { k, K_BOOL, FLD(m), d, NULL, 0, 1, 0, NULL, h }
#define STR(k, m, d, minlen, h) { k, K_STRING, FLD(m), 0, d, minlen, 0, 0, NULL, h }
#define ENUM(k, m, d, h, ...) \
    { k, K_ENUM, FLD(m), 0, d, 0, 0, 0, (const char *const[]){ __VA_ARGS__, NULL }, h }

const key_def cfg_schema[] = {
    ENUM("device", device, "cpu",
         "compute backend (for tests: devsim = the cpu arithmetic behind device-only memory, cudasim = the CUDA "
         "kernels run on the CPU)", "cpu", "cuda", "devsim", "cudasim"),
    ENUM("comm", comm, "auto", "gradient communicator (auto: mpi for cpu, nccl for cuda, devsim for devsim and cudasim)", "auto",
         "mpi", "nccl", "devsim"),
    ENUM("precision", precision, "fp32",
         "working precision: bf16/fp16 round every stored parameter, activation and gradient to it (fp32 "
         "arithmetic) and keep fp32 master weights and Adam moments in each rank's shard, fp16 with dynamic loss scaling",
         "fp32", "bf16", "fp16"),
    FLT("fp16.init_scale", fp16.init_scale, 65536, 1, 1e30, 0, "fp16: the first loss scale"),
    FLT("fp16.growth_factor", fp16.growth_factor, 2, 1, 1e6, MIN_OPEN,
        "fp16: the scale is multiplied by this after growth_interval finite steps in a row"),
    FLT("fp16.backoff_factor", fp16.backoff_factor, 0.5, 0, 1, MIN_OPEN | MAX_OPEN,
        "fp16: the scale is multiplied by this when a step's gradients overflow (that step is skipped)"),
    LONG("fp16.growth_interval", fp16.growth_interval, 2000, 1, 1000000000L, "fp16: finite steps before the scale grows"),

    INT("model.n_layer", model.n_layer, 2, 1, ZT_MAX_LAYERS, "transformer blocks"),
    INT("model.n_head", model.n_head, 2, 1, 4096, "attention heads (must divide n_embd)"),
    INT("model.n_embd", model.n_embd, 64, 1, 65536, "embedding width C"),
    INT("model.vocab_size", model.vocab_size, 512, 2, 1 << 24, "real tokens in the vocabulary"),
    INT("model.padded_vocab", model.padded_vocab, 0, 0, 1 << 24,
        "vocab rows allocated (0 = vocab_size rounded up to 128)"),
    INT("model.block_size", model.block_size, 64, 1, 1 << 20, "max sequence length (position embeddings)"),
    FLT("model.init_std", model.init_std, 0.02, 0, 10, 0, "std of the normal weight init"),
    ENUM("model.family", model.family, "gpt2",
         "the block's description: gpt2 = LayerNorm, learned positions, GELU MLP, biases, tied LM head; llama and "
         "mistral = RMSNorm, rotary positions, SwiGLU MLP, no biases, a separate LM head; qwen2 = llama's with q, k, v "
         "biases and norm_eps 1e-6; bert and roberta = encoders trained as masked language models (bidirectional attention with "
         "a padding mask, post-LN, exact GELU, token types, an MLM head; roberta's positions start at pad_id + 1). The "
         "model.* keys below override single choices",
         "gpt2", "llama", "mistral", "qwen2", "bert", "roberta"),
    INT("model.type_vocab_size", model.type_vocab_size, -1, -1, 1 << 16,
        "encoders: token types (-1 = the family's: bert 2, roberta 1); a token's type is the number of model.sep_id "
        "tokens before it in its sequence (BERT's segments A, B), at most type_vocab_size - 1"),
    INT("model.pad_id", model.pad_id, -1, -1, 1 << 24,
        "encoders: the padding token, never attended to (-1 = the family's: bert 0, roberta 1)"),
    INT("model.sep_id", model.sep_id, -1, -1, 1 << 24,
        "encoders: the separator token that starts the next token type (-1: every token has type 0)"),
    INT("model.position_offset", model.position_offset, -1, -1, 1 << 20,
        "encoders: position t uses position embedding t + offset (-1 = the family's: bert 0, roberta pad_id + 1)"),
    INT("model.n_kv_head", model.n_kv_head, 0, 0, 4096,
        "key/value heads (grouped-query attention; 1 = multi-query; must divide n_head); 0 = n_head"),
    INT("model.intermediate_size", model.intermediate_size, 0, 0, 1 << 20,
        "the MLP's hidden size (config.json's intermediate_size); 0 = 4 * n_embd, GELU only"),
    ENUM("model.norm", model.norm, "auto", "normalisation: auto = the family's", "auto", "layernorm", "rmsnorm"),
    ENUM("model.position", model.position, "auto", "positions: auto = the family's; rope = rotary",
         "auto", "learned", "rope"),
    ENUM("model.mlp", model.mlp, "auto", "MLP: auto = the family's; gelu = the tanh approximation, gelu_exact = erf",
         "auto", "gelu", "gelu_exact", "swiglu"),
    STR("model.bias", model.bias, "auto", 1,
        "linear layers with a bias: auto = the family's, none, all, or a comma list of qkv, proj, fc, fcproj"),
    ENUM("model.tie_embeddings", model.tie_embeddings, "auto", "the LM head is the token embedding: auto = the family's",
         "auto", "true", "false"),
    FLT("model.norm_eps", model.norm_eps, 0, 0, 1, 0,
        "the normalisation's epsilon (0 = the family's: 1e-5; qwen2 1e-6, bert 1e-12)"),
    FLT("model.rope_theta", model.rope_theta, 0, 0, 1e12, 0, "rotary base (0 = 10000)"),
    ENUM("model.rope_scaling", model.rope_scaling, "none",
         "rotary frequency scaling: llama3 = Llama 3.1's (rope_factor, rope_*_freq_factor, rope_original_max_position)",
         "none", "llama3"),
    FLT("model.rope_factor", model.rope_factor, 8, 1, 1e6, 0, "llama3 scaling: factor"),
    FLT("model.rope_low_freq_factor", model.rope_low_freq_factor, 1, 0, 1e6, MIN_OPEN, "llama3 scaling: low_freq_factor"),
    FLT("model.rope_high_freq_factor", model.rope_high_freq_factor, 4, 0, 1e6, MIN_OPEN,
        "llama3 scaling: high_freq_factor"),
    INT("model.rope_original_max_position", model.rope_original_max_position, 8192, 1, 1 << 24,
        "llama3 scaling: original_max_position_embeddings"),

    FLT("mlm.prob", mlm.prob, 0.15, 0, 1, MIN_OPEN, "masked LM: the fraction of tokens selected for prediction"),
    FLT("mlm.mask_frac", mlm.mask_frac, 0.8, 0, 1, 0, "masked LM: of the selected tokens, the fraction replaced by mlm.mask_id"),
    FLT("mlm.random_frac", mlm.random_frac, 0.1, 0, 1, 0,
        "masked LM: of the selected tokens, the fraction replaced by a uniformly random token (the rest stay as they are)"),
    INT("mlm.mask_id", mlm.mask_id, -1, -1, 1 << 24, "masked LM: the [MASK] token (required by the encoder families)"),
    INT("mlm.cls_id", mlm.cls_id, -1, -1, 1 << 24, "masked LM: the [CLS] token, never selected (-1: none)"),
    INT("mlm.sep_id", mlm.sep_id, -1, -1, 1 << 24, "masked LM: the [SEP] token, never selected (-1: model.sep_id)"),

    INT("train.micro_batch", train.micro_batch, 4, 0, 1 << 20,
        "sequences per micro-batch per rank, or \"auto\" (stored as 0): the largest that fits train.mem_limit"),
    STR("train.mem_limit", train.mem_limit, "", 0,
        "memory per rank for micro_batch auto, e.g. 8G (\"\" = the node's available memory / its ranks, x 0.9)"),
    ENUM("train.recompute", train.recompute, "none",
         "activations recomputed in backward instead of kept (bit-identical results): gelu = the GELU outputs, layer = all but each layer's output",
         "none", "gelu", "layer"),
    ENUM("train.act_storage", train.act_storage, "auto",
         "activations kept for backward: auto = 2 bytes each in a bf16/fp16 run (exact: they hold values of the precision), fp32 = 4 bytes",
         "auto", "fp32"),
    ENUM("train.param_storage", train.param_storage, "auto",
         "working parameters of a bf16/fp16 run (not LoRA): precision = 2-byte words, unpacked into one fp32 window "
         "(wte or a layer) as forward and backward reach them (exact, bit-identical), fp32 = float32 buffers holding values "
         "of the precision, auto = precision on cuda/cudasim where it takes fewer bytes (the window under half the "
         "parameters), fp32 on cpu/devsim (unpacking costs ~7% of a d6 step there)", "auto", "precision", "fp32"),
    ENUM("train.attention", train.attention, "auto",
         "causal attention in training: auto = without the (T, T) matrices where the backend can (cuda, head size 32 or 64: "
         "each layer keeps its softmax statistics and backward recomputes the probabilities), materialized = "
         "scores and probabilities kept for backward (what the cpu backend always does)",
         "auto", "materialized"),
    INT("train.head_chunks", train.head_chunks, 1, 1, 1 << 16,
        "decoders: the LM head, its loss and its backward in this many chunks of a micro-batch's rows, one after "
        "the other, so the logits buffer holds a chunk's rows, not the micro-batch's (1 = all at once; more: the "
        "head's weight gradient is summed chunk by chunk, a different order of additions)"),
    BOOL("train.cuda_graph", train.cuda_graph, 0,
         "cuda / cudasim: once two steps made the same launches, record the next as one CUDA graph and replay "
         "it for the steps after, while nothing changes what a step launches (bit-identical; not yet run on a GPU)"),
    INT("train.global_batch", train.global_batch, 4, 1, 1 << 30, "sequences per optimizer step, all ranks"),
    INT("train.seq_len", train.seq_len, 64, 1, 1 << 20, "tokens per training sequence (<= block_size)"),
    LONG("train.steps", train.steps, 100, 0, BIG, "optimizer steps"),
    FLT("train.lr", train.lr, 3e-4, 0, 10, 0, "peak learning rate"),
    FLT("train.min_lr", train.min_lr, 0, 0, 10, 0, "final learning rate (absolute, <= lr)"),
    LONG("train.warmup_steps", train.warmup_steps, 0, 0, BIG, "linear warmup steps (<= steps)"),
    ENUM("train.schedule", train.schedule, "cosine", "lr decay after warmup", "cosine", "linear", "constant"),
    FLT("train.weight_decay", train.weight_decay, 0.1, 0, 100, 0, "AdamW decoupled weight decay"),
    FLT("train.beta1", train.beta1, 0.9, 0, 1, MAX_OPEN, "AdamW beta1"),
    FLT("train.beta2", train.beta2, 0.95, 0, 1, MAX_OPEN, "AdamW beta2"),
    FLT("train.eps", train.eps, 1e-8, 0, 1, MIN_OPEN, "AdamW epsilon"),
    FLT("train.grad_clip", train.grad_clip, 1.0, 0, 1e9, 0, "max global grad norm (0 = off)"),
    LONG("train.seed", train.seed, 1337, 0, BIG, "seed of init, data order and sampling"),
    INT("train.threads", train.threads, 0, 0, 4096, "threads per rank (0 = auto: cores / local ranks)"),
    INT("train.log_every", train.log_every, 1, 1, 1 << 30, "log a metrics line every N steps"),

    STR("data.train", data.train, "", 0,
        "training shard file, a glob of shard files, or a weighted mixture \"W1 PATH1 W2 PATH2 ...\""),
    STR("data.val", data.val, "", 0, "validation shard file (\"\" = no validation)"),
    STR("data.tokenizer", data.tokenizer, "", 0, "tokenizer file (\"\" = sampling prints token ids)"),
    BOOL("data.shuffle", data.shuffle, 1, "windows in a seeded permutation per epoch (false: in file order)"),
    BOOL("data.stream", data.stream, 0,
         "data.train is text / JSON Lines files tokenized as they are read with data.tokenizer (in order; no prepare)"),
    STR("data.field", data.field, "text", 1, "data.stream: the JSON Lines field holding the text"),

    LONG("eval.every", eval.every, 0, 0, BIG, "validate every N steps (0 = only at the end)"),
    INT("eval.sequences", eval.sequences, 32, 1, 1 << 30,
        "validation sequences per evaluation (the first N windows of data.val, whatever micro_batch and ranks)"),
    INT("eval.batches", eval.batches, 0, 0, 1 << 30,
        "obsolete (older configs): > 0 scores batches x micro_batch sequences instead of eval.sequences"),

    LONG("sample.every", sample.every, 0, 0, BIG, "sample every N steps (0 = off)"),
    INT("sample.tokens", sample.tokens, 64, 1, 1 << 24, "tokens to generate"),
    FLT("sample.temperature", sample.temperature, 1.0, 0, 100, MIN_OPEN, "softmax temperature"),
    INT("sample.top_k", sample.top_k, 40, 0, 1 << 24, "sample from the k most likely (0 = all, 1 = greedy)"),
    STR("sample.prompt", sample.prompt, "", 0, "prompt text (\"\" = start from end-of-text)"),

    INT("zero.stage", zero.stage, 2, 0, 3,
        "0 = plain DP, 1 = shard optimizer, 2 = + shard gradients, 3 = + shard parameters (gathered per layer)"),
    ENUM("zero.offload", zero.offload, "none",
         "optimizer state in host memory, the update on the host: none, optimizer (master weights and Adam moments), "
         "optimizer+params (stage 3: the parameter shard too)", "none", "optimizer", "optimizer+params"),
    ENUM("zero.reduce", zero.reduce, "ordered", "gradient reduction: ordered = bitwise N-rank == 1-rank",
         "ordered", "native"),
    FLT("zero.bucket_mb", zero.bucket_mb, 25, 0, 1e6, MIN_OPEN, "gradient bucket size in MiB"),
    ENUM("zero.grad_wire", zero.grad_wire, "auto",
         "bf16/fp16 gradients in the ordered exchange: precision = 2-byte words (exact, half the bytes, the owner sums "
         "fp32), fp32 = 4 bytes, auto = precision on cuda/cudasim, fp32 on cpu/devsim (one CPU node: packing costs "
         "more than the bytes saved)", "auto", "precision", "fp32"),

    LONG("checkpoint.every", checkpoint.every, 0, 0, BIG, "checkpoint every N steps (0 = only the final one)"),
    INT("checkpoint.keep", checkpoint.keep, 3, 0, 1 << 20, "checkpoints to keep (0 = all)"),
    BOOL("checkpoint.async", checkpoint.async, 0,
         "write checkpoints in the background: each rank copies its shard to host staging (its size is counted by estimate) and training goes on"),
    BOOL("checkpoint.direct_io", checkpoint.direct_io, 1,
         "write and read checkpoint data with O_DIRECT where the file system allows it (no page cache)"),
    STR("checkpoint.dir", checkpoint.dir, "", 0, "directory (\"\" = <run dir>/checkpoints)"),
    INT("checkpoint.signal_exit_code", checkpoint.signal_exit_code, 0, 0, 255,
        "exit code after a SIGUSR1/SIGTERM checkpoint (e.g. 3 to make a Slurm script requeue)"),

    STR("run.root", run.root, "runs", 1, "directory that holds sessions"),
    STR("run.session", run.session, "default", 1,
        "session: a group of runs compared together (a directory name: no '/', not '.' or '..')"),
    STR("run.name", run.name, "run", 1,
        "run name (numeric suffix added if it exists), a directory name: no '/', not '.' or '..'"),

    BOOL("metrics.tensorboard", metrics.tensorboard, 0,
         "rank 0 also writes TensorBoard event files (events.out.tfevents.*) in the run directory"),

    BOOL("lora.enabled", lora.enabled, 0,
         "LoRA fine-tuning: train low-rank adapters on the frozen weights of lora.base (its model.* shape is used)"),
    STR("lora.base", lora.base, "", 0, "checkpoint with the frozen base weights (e.g. from `ztrain import`)"),
    INT("lora.rank", lora.rank, 8, 1, 4096, "adapter rank r"),
    FLT("lora.alpha", lora.alpha, 16, 0, 1e6, MIN_OPEN, "adapter scaling alpha / r (alpha / sqrt(r) with lora.rslora)"),
    BOOL("lora.rslora", lora.rslora, 0, "rank-stabilised scaling alpha / sqrt(r)"),
    FLT("lora.dropout", lora.dropout, 0, 0, 1, MAX_OPEN, "dropout probability on the adapter input"),
    STR("lora.targets", lora.targets, "all", 1,
        "adapted linear layers: comma list of qkv (attn.c_attn), proj (attn.c_proj), fc (mlp.c_fc), fcproj "
        "(mlp.c_proj) for GPT-2; q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj (PEFT's names) for the "
        "Llama family; or all"),
    ENUM("lora.quant", lora.quant, "none",
         "QLoRA: the frozen base's linear weights stored quantised (nf4: 4-bit NormalFloat, blocks of 64, nf4_dq: with "
         "double-quantised block scales, int8: per-row absmax) and dequantised on the fly", "none", "nf4", "nf4_dq", "int8"),
};

const int cfg_n_keys = (int)(sizeof cfg_schema / sizeof cfg_schema[0]);
