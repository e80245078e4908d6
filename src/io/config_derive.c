/* config_derive.c — what a loaded config means beyond its keys' values: the precision as ZT_PREC_*, the
 * activation / parameter storage flags (zt_config_recompute), lora.targets as a mask and the padded vocabulary.
 * Pure functions of a zt_config (config.h); the schema, parsing and validation are config.c's. */
#include "io/config.h"
#include "util/util.h"

#include <string.h>

int zt_config_prec(const zt_config *c) {
    return strcmp(c->precision, "bf16") == 0 ? 1 : strcmp(c->precision, "fp16") == 0 ? 2 : 0;
}

int zt_config_recompute(const zt_config *c) {
    const int r = strcmp(c->train.recompute, "layer") == 0 ? 2 : strcmp(c->train.recompute, "gelu") == 0 ? 1 : 0;
    const int pack = r != 2 && strcmp(c->train.act_storage, "auto") == 0 && zt_config_prec(c) != 0;
    const int fused = strcmp(c->train.attention, "auto") == 0 &&
                      (strcmp(c->device, "cuda") == 0 || strcmp(c->device, "cudasim") == 0);
    const int gpu = strcmp(c->device, "cuda") == 0 || strcmp(c->device, "cudasim") == 0;
    /* auto: where the words and model.c's fp32 window (wte or one layer, whichever is larger, plus wpe and ln_f)
       take fewer bytes than float32 parameters, i.e. the window holds less than half of them (GPT-2 124M: 32%;
       not d6, whose wte is 64% of its parameters) */
    const double C = c->model.n_embd, layer = 12.0 * C * C + 13.0 * C, wte = (double)zt_config_padded_vocab(c) * C;
    const double fixed = (double)c->model.block_size * C + 2.0 * C;
    const double window = (wte > layer ? wte : layer) + fixed, total = wte + c->model.n_layer * layer + fixed;
    const int params16 = zt_config_prec(c) != 0 && !c->lora.enabled &&
                         (strcmp(c->train.param_storage, "precision") == 0 ||
                          (strcmp(c->train.param_storage, "auto") == 0 && gpu && 2.0 * window < total));
    return r | (pack ? 4 : 0) | (fused ? 8 : 0) | (params16 ? 16 : 0);
}

unsigned zt_config_lora_targets(const char *list, char *err, size_t errlen) {
    static const char *const names[] = {"qkv", "proj", "fc", "fcproj"};
    unsigned mask = 0;
    const char *p = list;
    while (*p) {
        size_t n = strcspn(p, ",");
        unsigned bit = 0;
        if (n == 3 && strncmp(p, "all", 3) == 0) bit = 15;
        for (int i = 0; i < 4 && !bit; i++)
            if (strlen(names[i]) == n && strncmp(p, names[i], n) == 0) bit = 1u << i;
        if (!bit) {
            zt_errf(err, errlen, "lora.targets = \"%s\": \"%.*s\" is not a target (expected a comma list of qkv, proj, "
                    "fc, fcproj, or all)", list, (int)n, p);
            return 0;
        }
        mask |= bit;
        p += n;
        if (*p == ',') p++;
    }
    if (!mask) zt_errf(err, errlen, "lora.targets = \"%s\": empty (expected a comma list of qkv, proj, fc, fcproj, or all)", list);
    return mask;
}

int zt_config_padded_vocab(const zt_config *c) {
    if (c->model.padded_vocab > 0) return c->model.padded_vocab;
    return (c->model.vocab_size + 127) / 128 * 128;
}
