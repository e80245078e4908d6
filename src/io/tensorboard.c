/* tensorboard.c — TensorBoard event files: TFRecord framing + the protobuf wire format of
 * tensorflow.Event / Summary written by hand (varints, fixed64/fixed32, length-delimited fields).
 *
 *   Event   { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5; }
 *   Summary { repeated Value value = 1; }   Value { string tag = 1; float simple_value = 2; }
 */
#include "io/tensorboard.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

/* ---------------------------------------------------------------- CRC32C */

static uint32_t crc_table[256];
static int crc_ready;

static void crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1; /* reflected Castagnoli */
        crc_table[i] = c;
    }
    crc_ready = 1;
}

uint32_t zt_crc32c(const void *data, size_t n) {
    if (!crc_ready) crc_init();
    const unsigned char *p = data;
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) c = crc_table[(c ^ p[i]) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

uint32_t zt_tb_masked_crc(const void *data, size_t n) {
    uint32_t c = zt_crc32c(data, n);
    return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

/* ---------------------------------------------------------------- protobuf encoding */

typedef struct pbuf {
    unsigned char b[4096];
    size_t n;
    int overflow;
} pbuf;

static void put(pbuf *p, const void *src, size_t n) {
    if (p->n + n > sizeof p->b) { p->overflow = 1; return; }
    memcpy(p->b + p->n, src, n);
    p->n += n;
}

static void put_varint(pbuf *p, uint64_t v) {
    unsigned char t[10];
    size_t n = 0;
    do {
        t[n] = (unsigned char)(v & 0x7F);
        v >>= 7;
        if (v) t[n] |= 0x80;
        n++;
    } while (v);
    put(p, t, n);
}

static void put_le(pbuf *p, uint64_t v, int bytes) {
    unsigned char t[8];
    for (int i = 0; i < bytes; i++) t[i] = (unsigned char)(v >> (8 * i));
    put(p, t, (size_t)bytes);
}

/* wire types: 0 varint, 1 fixed64, 2 length-delimited, 5 fixed32 */
static void put_key(pbuf *p, int field, int wire) { put_varint(p, (uint64_t)((field << 3) | wire)); }

static void put_bytes(pbuf *p, int field, const void *data, size_t n) {
    put_key(p, field, 2);
    put_varint(p, n);
    put(p, data, n);
}

static void put_double(pbuf *p, int field, double v) {
    uint64_t u;
    memcpy(&u, &v, 8);
    put_key(p, field, 1);
    put_le(p, u, 8);
}

static void put_float(pbuf *p, int field, float v) {
    uint32_t u;
    memcpy(&u, &v, 4);
    put_key(p, field, 5);
    put_le(p, u, 4);
}

/* ---------------------------------------------------------------- records */

static double wall_time(void) {
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (double)tv.tv_sec + 1e-6 * (double)tv.tv_usec;
}

static int write_record(zt_tb *tb, const pbuf *ev) {
    if (ev->overflow) return 1;
    unsigned char len[8];
    for (int i = 0; i < 8; i++) len[i] = (unsigned char)((uint64_t)ev->n >> (8 * i));
    uint32_t lc = zt_tb_masked_crc(len, 8), dc = zt_tb_masked_crc(ev->b, ev->n);
    unsigned char lcb[4], dcb[4];
    for (int i = 0; i < 4; i++) { lcb[i] = (unsigned char)(lc >> (8 * i)); dcb[i] = (unsigned char)(dc >> (8 * i)); }
    if (fwrite(len, 1, 8, tb->f) != 8 || fwrite(lcb, 1, 4, tb->f) != 4 || fwrite(ev->b, 1, ev->n, tb->f) != ev->n ||
        fwrite(dcb, 1, 4, tb->f) != 4)
        return 1;
    return fflush(tb->f) != 0;
}

/* TensorBoard reads the files of a directory in name order and, seeing a step go backwards, drops
   the later steps it has: a resumed run's file must sort after every earlier one, also when it
   starts within the same second. */
static long file_time(const char *dir) {
    long t = (long)time(NULL);
    DIR *d = opendir(dir);
    if (!d) return t;
    static const char pre[] = "events.out.tfevents.";
    for (struct dirent *e; (e = readdir(d));) {
        if (strncmp(e->d_name, pre, sizeof pre - 1) != 0) continue;
        long was = strtol(e->d_name + sizeof pre - 1, NULL, 10);
        if (was >= t) t = was + 1;
    }
    closedir(d);
    return t;
}

int zt_tb_open(zt_tb *tb, const char *dir, char *err, size_t errlen) {
    memset(tb, 0, sizeof *tb);
    char host[256] = "localhost";
    if (gethostname(host, sizeof host - 1) != 0) snprintf(host, sizeof host, "localhost");
    host[sizeof host - 1] = 0;
    snprintf(tb->path, sizeof tb->path, "%s/events.out.tfevents.%010ld.%s.%ld", dir, file_time(dir), host,
             (long)getpid());
    tb->f = fopen(tb->path, "wb");
    if (!tb->f) {
        snprintf(err, errlen, "%s: cannot write: %s", tb->path, strerror(errno));
        return 1;
    }
    pbuf ev = {.n = 0};
    put_double(&ev, 1, wall_time());
    put_key(&ev, 2, 0);
    put_varint(&ev, 0);
    put_bytes(&ev, 3, "brain.Event:2", 13);
    if (write_record(tb, &ev)) {
        snprintf(err, errlen, "%s: write failed: %s", tb->path, strerror(errno));
        zt_tb_close(tb);
        return 1;
    }
    return 0;
}

int zt_tb_scalars(zt_tb *tb, long step, const zt_tb_scalar *v, int n) {
    if (!tb->f) return 1;
    pbuf sum = {.n = 0}, val, ev = {.n = 0};
    for (int i = 0; i < n; i++) {
        val.n = 0;
        val.overflow = 0;
        put_bytes(&val, 1, v[i].tag, strlen(v[i].tag));
        put_float(&val, 2, v[i].value);
        if (val.overflow) return 1;
        put_bytes(&sum, 1, val.b, val.n);
    }
    if (sum.overflow) return 1;
    put_double(&ev, 1, wall_time());
    put_key(&ev, 2, 0);
    put_varint(&ev, (uint64_t)(int64_t)step); /* int64: negative steps would take 10 bytes, as protobuf does */
    put_bytes(&ev, 5, sum.b, sum.n);
    return write_record(tb, &ev);
}

void zt_tb_close(zt_tb *tb) {
    if (tb->f) fclose(tb->f);
    tb->f = NULL;
}
