/* argmax_cases.h — logits that exercise argmax_rows' promises (iface/backend.h), shared by the cpu op test
 * (tests/unit/cpu/test_ops_encoder.c) and the CUDA kernel test (cuda/tests/test_kernels_elem.cc): row r of x (N, ld)
 * keeps its values in [0, V) or, by r % 7, gets a maximum repeated in three columns (the lowest must win), a NaN in
 * column 0, -inf with NaN (the first -inf wins), NaN only (index 0), +inf twice, or -inf only (index 0); the padded
 * columns [V, ld) hold 1e30, larger than any candidate, which must never be read. Plain C and C++. */
#ifndef ZT_ARGMAX_CASES_H
#define ZT_ARGMAX_CASES_H

#include <math.h>

static inline void argmax_cases_fill(float *x, int N, int V, int ld) {
    for (int r = 0; r < N; r++) {
        float *row = x + (size_t)r * ld;
        for (int j = V; j < ld; j++) row[j] = 1e30f;
        for (int j = 0; j < V; j++) {
            switch (r % 7) {
            case 1: if (j == V / 2 || j == V / 3 || j == V - 1) row[j] = 50.0f; break;
            case 2: if (j == 0) row[j] = NAN; break;
            case 3: row[j] = j % 5 ? -INFINITY : NAN; break;
            case 4: row[j] = NAN; break;
            case 5: if (j == V - 1 || j == V / 2) row[j] = INFINITY; break;
            case 6: row[j] = -INFINITY; break;
            default: break;
            }
        }
    }
}

#endif
