/* test_mlm_masks.c — the masked-LM masks (core/model/mlm.h): the selection rate and the 80/10/10 split within binomial
 * bounds, special and padding positions never selected, targets the original tokens exactly where selected, the
 * masks a function of (seed, sequence, position) alone (the same when a sequence is masked twice, in another
 * order or alone), different for another sequence or seed, and the configured fractions followed (0.3 / 0.5 / 0.2). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "core/model/mlm.h"

enum { T = 128, NSEQ = 4000, V = 1000, PAD = 0, CLS = 1, SEP = 2, MASK = 3 };

static void config(zt_config *c, double prob, double mfrac, double rfrac) {
    zt_config_defaults(c);
    snprintf(c->model.family, sizeof c->model.family, "bert");
    c->model.vocab_size = V;
    c->model.sep_id = SEP;
    c->mlm.prob = prob;
    c->mlm.mask_frac = mfrac;
    c->mlm.random_frac = rfrac;
    c->mlm.mask_id = MASK;
    c->mlm.cls_id = CLS;
}

/* sequence s: [CLS], tokens >= 4, a [SEP] in the middle and at the end, padding after it in odd sequences */
static void make_seq(uint64_t s, int32_t *tok, int32_t *tg) {
    const int end = s % 2 ? T - 20 : T - 1;
    for (int t = 0; t < T; t++) {
        tok[t] = t == 0 ? CLS : t == T / 2 || t == end ? SEP : t > end ? PAD : 4 + (int32_t)((s * 7919 + (uint64_t)t * 104729) % (V - 4));
        tg[t] = t > end ? -1 : 0; /* a loss mask: padding can never be a target */
    }
}

/* |x - n p| within 5 standard deviations of a binomial(n, p) */
static int binomial_ok(long x, long n, double p) { return fabs((double)x - n * p) <= 5.0 * sqrt(n * p * (1 - p)) + 1; }

static void rates(double prob, double mfrac, double rfrac, const char *tag) {
    zt_config c;
    config(&c, prob, mfrac, rfrac);
    zt_mlm o;
    zt_mlm_init(&o, &c, 1234);
    int32_t tok[T], tg[T], orig[T];
    long eligible = 0, sel = 0, masked = 0, randomed = 0, kept = 0, bad_special = 0, bad_target = 0, count_bad = 0;
    for (uint64_t s = 0; s < NSEQ; s++) {
        make_seq(s, tok, tg);
        memcpy(orig, tok, sizeof orig);
        int eligible_here = 0;
        for (int t = 0; t < T; t++) eligible_here += orig[t] >= 4 && tg[t] >= 0;
        const int n = zt_mlm_apply(&o, s, tok, tg, T);
        int nsel = 0;
        for (int t = 0; t < T; t++) {
            if (tg[t] < 0) {
                bad_target += tok[t] != orig[t];
                continue;
            }
            nsel++;
            bad_special += orig[t] < 4;
            bad_target += tg[t] != orig[t];
            if (tok[t] == MASK) masked++;
            else if (tok[t] == orig[t]) kept++; /* a random draw of the same token counts here: p 1/V */
            else randomed++;
        }
        count_bad += n != nsel;
        eligible += eligible_here;
        sel += nsel;
    }
    char name[96];
    snprintf(name, sizeof name, "mlm_%s_selection", tag);
    check(binomial_ok(sel, eligible, prob), name, "%ld of %ld eligible positions selected, expected %.4f", sel,
          eligible, prob);
    snprintf(name, sizeof name, "mlm_%s_split", tag);
    check(binomial_ok(masked, sel, mfrac) && binomial_ok(randomed, sel, rfrac * (1.0 - 1.0 / V)), name,
          "of %ld selected: %ld [MASK] (expected %.2f), %ld random, %ld unchanged", sel, masked, mfrac, randomed, kept);
    snprintf(name, sizeof name, "mlm_%s_specials_never", tag);
    check(bad_special == 0 && bad_target == 0 && count_bad == 0, name,
          "%ld specials selected, %ld wrong targets or changed unselected tokens, %ld wrong counts", bad_special,
          bad_target, count_bad);
}

int main(void) {
    rates(0.15, 0.8, 0.1, "default");
    rates(0.3, 0.5, 0.2, "configured");
    zt_config c;
    config(&c, 0.15, 0.8, 0.1);
    zt_mlm a, b;
    zt_mlm_init(&a, &c, 7);
    zt_mlm_init(&b, &c, 8);
    /* a function of (seed, s, t): sequence 123 masked after others, alone, and again; other sequence / seed differ */
    int32_t t1[T], g1[T], t2[T], g2[T], t3[T], g3[T], t4[T], g4[T];
    make_seq(123, t1, g1);
    zt_mlm_apply(&a, 123, t1, g1, T);
    for (uint64_t s = 0; s < 50; s++) {
        make_seq(s, t2, g2);
        zt_mlm_apply(&a, s, t2, g2, T);
    }
    make_seq(123, t2, g2);
    zt_mlm_apply(&a, 123, t2, g2, T);
    make_seq(123, t3, g3);
    zt_mlm_apply(&a, 125, t3, g3, T); /* the same tokens as sequence 125 */
    make_seq(123, t4, g4);
    zt_mlm_apply(&b, 123, t4, g4, T);
    check(!memcmp(t1, t2, sizeof t1) && !memcmp(g1, g2, sizeof g1), "mlm_counter_based", "sequence 123's masks changed "
          "when masked again after 50 others");
    check(memcmp(g1, g3, sizeof g1) != 0 && memcmp(g1, g4, sizeof g1) != 0, "mlm_sequence_and_seed_matter",
          "the same masks for another sequence index or seed");
    return check_exit_status();
}
