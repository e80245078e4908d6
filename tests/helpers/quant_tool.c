/* quant_tool.c — a command-line face of src/core/lora/quant.c for tests/e2e/test_quant.py, which checks it
 * against an independent numpy implementation of the formats.
 *
 *   quant_tool encode FMT ROWS COLS IN.f32 OUT.blob OUT.f32
 *       reads ROWS*COLS raw little-endian fp32 from IN.f32, writes the quantised blob (FMT = nf4,
 *       nf4_dq or int8) to OUT.blob and its decoding to OUT.f32 (fp32), and prints one line
 *       "layout fmt=F rows=R cols=C n=N nblocks=B nblocks2=B2 codes=O absmax=O qabsmax=O absmax2=O
 *       mean=O scales=O bytes=S bits_per_param=X" (offsets of absent sections are -1)
 *   quant_tool table nf4|dq8 OUT.f32
 *       writes the 16 NF4 values or the 256 DQ8 values (fp32) as the decoder computes them
 *
 * Errors: one "quant_tool: error: ..." line on stderr, exit 2.
 */
#include "core/lora/quant.h"
#include "util/util.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void die(const char *fmt, ...) ZT_PRINTF(1, 2) ZT_NORETURN;
static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "quant_tool: error: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(2);
}

static void write_file(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f || (n && fwrite(p, 1, n, f) != n) || fclose(f) != 0) die("%s: cannot write", path);
}

static size_t parse_size(const char *s, const char *what)
{
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (!*s || *end || s[0] == '-') die("%s: not a count: '%s'", what, s);
    return (size_t)v;
}

static long off(size_t o) { return o == ZT_QUANT_NONE ? -1L : (long)o; }

static int cmd_encode(char **argv)
{
    zt_quant_fmt fmt;
    if (zt_quant_fmt_parse(argv[0], &fmt)) die("unknown format '%s' (nf4, nf4_dq, int8)", argv[0]);
    size_t rows = parse_size(argv[1], "ROWS"), cols = parse_size(argv[2], "COLS");
    FILE *f = fopen(argv[3], "rb");
    if (!f) die("%s: cannot open", argv[3]);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    zt_quant_layout L = zt_quant_plan(fmt, rows, cols);
    if (len < 0 || (size_t)len != L.n * sizeof(float))
        die("%s: %ld bytes, expected %zu x %zu fp32 = %zu", argv[3], len, rows, cols, L.n * sizeof(float));
    float *w = malloc(L.n * sizeof(float) + 1), *out = malloc(L.n * sizeof(float) + 1);
    uint8_t *blob = malloc(L.bytes + 1);
    if (!w || !out || !blob) die("out of memory");
    if (L.n && fread(w, sizeof(float), L.n, f) != L.n) die("%s: short read", argv[3]);
    fclose(f);
    char err[256];
    if (zt_quant_encode(&L, w, blob, err, sizeof err)) die("%s: %s", argv[3], err);
    zt_quant_decode(&L, blob, 0, L.n, out);
    write_file(argv[4], blob, L.bytes);
    write_file(argv[5], out, L.n * sizeof(float));
    printf("layout fmt=%s rows=%zu cols=%zu n=%zu nblocks=%zu nblocks2=%zu codes=%ld absmax=%ld qabsmax=%ld "
           "absmax2=%ld mean=%ld scales=%ld bytes=%zu bits_per_param=%.6f\n",
           zt_quant_fmt_name(fmt), L.rows, L.cols, L.n, L.nblocks, L.nblocks2, off(L.codes), off(L.absmax),
           off(L.qabsmax), off(L.absmax2), off(L.mean), off(L.scales), L.bytes, zt_quant_bits_per_param(&L));
    free(w);
    free(out);
    free(blob);
    return 0;
}

static int cmd_table(char **argv)
{
    float t[256];
    unsigned n;
    if (strcmp(argv[0], "nf4") == 0) {
        n = 16;
        for (unsigned k = 0; k < n; k++) t[k] = zt_nf4_value(k);
    } else if (strcmp(argv[0], "dq8") == 0) {
        n = 256;
        for (unsigned k = 0; k < n; k++) t[k] = zt_dq8_value(k);
    } else {
        die("unknown table '%s' (nf4, dq8)", argv[0]);
    }
    write_file(argv[1], t, n * sizeof(float));
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 8 && strcmp(argv[1], "encode") == 0) return cmd_encode(argv + 2);
    if (argc == 4 && strcmp(argv[1], "table") == 0) return cmd_table(argv + 2);
    die("usage: quant_tool encode FMT ROWS COLS IN.f32 OUT.blob OUT.f32 | quant_tool table nf4|dq8 OUT.f32");
}
