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

/* the step's scalars for hyper (adamw_multi, iface/backend.h): learning rate lr and the bias corrections of update
   t (1-based), a gradient scale of 1 (clip_scale writes the step's), the loss scale */
void zt_adamw_hyper(const zt_adamw_hp *hp, long t, float lr, float loss_scale, float out[ZT_HYPER_N]);

/* One AdamW update of flat elements [lo, hi): param/grad/m/v point at element lo; hyper (backend memory): the
   step's scalars (zt_adamw_hyper, the gradient scale from clip_scale). Weight decay applies to 2-D weights only,
   per the table; padding past the table is skipped. */
void zt_adamw_update(zt_backend *be, const zt_param_table *pt, size_t lo, size_t hi, float *param,
                     const float *grad, float *m, float *v, const zt_adamw_hp *hp, const float *hyper);


#endif
