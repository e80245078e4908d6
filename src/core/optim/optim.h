/* optim.h — AdamW over a shard of the flat buffer, the learning-rate schedule, global-norm clipping. */
#ifndef ZT_OPTIM_H
#define ZT_OPTIM_H

#include <stddef.h>
#include "iface/backend.h"
#include "io/config.h"
#include "core/model/model.h"

#define ZT_NORM_CHUNK 4096  /* the global norm is summed per chunk of this many elements */

typedef struct zt_adamw_hp {
    float beta1, beta2, eps, weight_decay;
} zt_adamw_hp;

/* learning rate for update number `step` (0-based): linear warmup over warmup_steps, then
   cosine / linear / constant from lr to min_lr at the last step */
double zt_lr_at(const zt_config *c, long step);

/* One AdamW update (t = 1-based update count) of flat elements [lo, hi): param/grad/m/v point at
   element lo. Weight decay applies to 2-D weights only, per the table; padding past the table is
   skipped. grad_scale multiplies every gradient (the clip factor). */
void zt_adamw_update(zt_backend *be, const zt_param_table *pt, size_t lo, size_t hi, float *param,
                     const float *grad, float *m, float *v, const zt_adamw_hp *hp, long t, float lr,
                     float grad_scale);

/* clip factor as torch.nn.utils.clip_grad_norm_: min(1, clip / (norm + 1e-6)); 1 when clip <= 0 */
float zt_clip_factor(double norm, double clip);

#endif
