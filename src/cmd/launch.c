/* launch.c — `ztrain launch`: choose a layout, build the mpirun / srun command line, print or exec
 * it. See launch.h for the rules. */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include "cmd/launch.h"

#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/dist/backend_factory.h"
#include "util/util.h"

#define MAX_ARGS 512
#define CPU_CORES_PER_RANK 8 /* one rank per up to this many cores (launch.h) */

typedef struct cmdline {
    const char *env[4];   /* "NAME=value", set before exec and printed first */
    int n_env;
    char *argv[MAX_ARGS];
    int argc;
} cmdline;

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "ztrain launch: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(ZT_EXIT_USER);
}

static void add(cmdline *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add(cmdline *c, const char *fmt, ...) {
    if (c->argc >= MAX_ARGS - 1) die("too many arguments (at most %d)", MAX_ARGS - 16);
    va_list ap;
    va_start(ap, fmt);
    char buf[4096];
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    c->argv[c->argc++] = strdup(buf);
    c->argv[c->argc] = NULL;
}

/* cores this process may run on (the affinity mask: what a container or cgroup grants) */
static int count_cores(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

static int on_path(const char *name) {
    const char *path = getenv("PATH");
    if (!path || !*path) return 0;
    char *dup = strdup(path), *save = NULL;
    int found = 0;
    for (char *d = strtok_r(dup, ":", &save); d && !found; d = strtok_r(NULL, ":", &save)) {
        char p[PATH_MAX + 64];
        snprintf(p, sizeof p, "%s/%s", *d ? d : ".", name);
        struct stat st;
        found = stat(p, &st) == 0 && S_ISREG(st.st_mode) && access(p, X_OK) == 0;
    }
    free(dup);
    return found;
}

/* hosts in an Open MPI hostfile: non-empty lines that are not comments */
static int count_hosts(const char *file) {
    FILE *f = fopen(file, "r");
    if (!f) die("--nodes %s: cannot read the hostfile: %s", file, strerror(errno));
    char line[1024];
    int n = 0;
    while (fgets(line, sizeof line, f)) {
        char *s = line;
        while (*s == ' ' || *s == '\t') s++;
        if (*s && *s != '#' && *s != '\n' && *s != '\r') n++;
    }
    fclose(f);
    if (n == 0) die("--nodes %s: the hostfile names no host", file);
    return n;
}

static int parse_count(const char *opt, const char *v) {
    char *end = NULL;
    errno = 0;
    long n = v ? strtol(v, &end, 10) : 0;
    if (!v || errno || *end || n < 1 || n > 1 << 20) die("%s: expected a positive integer, got '%s'", opt, v ? v : "");
    return (int)n;
}

/* a word the shell reads back unchanged */
static void print_quoted(FILE *f, const char *s) {
    int plain = *s != 0;
    for (const char *p = s; *p; p++)
        if (!(('a' <= *p && *p <= 'z') || ('A' <= *p && *p <= 'Z') || ('0' <= *p && *p <= '9') ||
              strchr("_-./:=+,@%", *p)))
            plain = 0;
    if (plain) { fputs(s, f); return; }
    fputc('\'', f);
    for (const char *p = s; *p; p++) {
        if (*p == '\'') fputs("'\\''", f);
        else fputc(*p, f);
    }
    fputc('\'', f);
}

static void print_cmd(FILE *f, const cmdline *c) {
    for (int i = 0; i < c->n_env; i++) { print_quoted(f, c->env[i]); fputc(' ', f); }
    for (int i = 0; i < c->argc; i++) {
        if (i) fputc(' ', f);
        print_quoted(f, c->argv[i]);
    }
    fputc('\n', f);
}

static void usage_error(void) {
    die("usage: ztrain launch [-n N | --per-node N] [--nodes HOSTFILE] [--dry-run] -- train -c CFG ...");
}

int zt_cmd_launch(int argc, char **argv) {
    /* argv[0] = "launch" */
    int ranks = 0, per_node = 0, dry = 0, sep = -1;
    const char *hostfile = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) { sep = i; break; }
        if (strcmp(a, "-n") == 0 || strcmp(a, "-np") == 0) ranks = parse_count(a, i + 1 < argc ? argv[++i] : NULL);
        else if (strcmp(a, "--per-node") == 0) per_node = parse_count(a, i + 1 < argc ? argv[++i] : NULL);
        else if (strcmp(a, "--nodes") == 0) {
            if (i + 1 >= argc) die("--nodes: expected a hostfile");
            hostfile = argv[++i];
        } else if (strcmp(a, "--dry-run") == 0) dry = 1;
        else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            printf("usage: ztrain launch [-n N | --per-node N] [--nodes HOSTFILE] [--dry-run] -- train -c CFG ...\n"
                   "  no -n: one rank per GPU, or on CPUs one rank per up to %d cores; in a Slurm allocation srun\n"
                   "  --mpi=pmix with its tasks, elsewhere mpirun; --dry-run prints the command\n",
                   CPU_CORES_PER_RANK);
            return 0;
        } else die("unknown option '%s' (the command to run goes after `--`)", a);
    }
    if (sep < 0 || sep + 1 >= argc) die("nothing to run after `--` (e.g. ztrain launch -n 2 -- train -c inputs/tiny.cfg)");
    if (ranks && per_node) usage_error();

    char exe[PATH_MAX];
    ssize_t el = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (el <= 0) die("cannot find this executable (/proc/self/exe): %s", strerror(errno));
    exe[el] = 0;

    cmdline c = {.n_env = 0, .argc = 0};
    char layout[512];
    const int cores = count_cores();
    const char *job = getenv("SLURM_JOB_ID"), *ntasks = getenv("SLURM_NTASKS");

    if (job && *job && ntasks && *ntasks) {
        /* Slurm: the allocation decides placement and binding */
        if (!on_path("srun")) die("inside Slurm job %s but srun is not on PATH", job);
        const char *nodes = getenv("SLURM_JOB_NUM_NODES");
        add(&c, "srun");
        add(&c, "--mpi=pmix");
        if (per_node) {
            add(&c, "--ntasks-per-node=%d", per_node);
            snprintf(layout, sizeof layout, "Slurm job %s: %d rank%s per node on %s node%s (--per-node)", job,
                     per_node, per_node == 1 ? "" : "s", nodes ? nodes : "?", nodes && !strcmp(nodes, "1") ? "" : "s");
        } else {
            int n = ranks ? ranks : parse_count("SLURM_NTASKS", ntasks);
            add(&c, "-n");
            add(&c, "%d", n);
            snprintf(layout, sizeof layout, "Slurm job %s: %d rank%s on %s node%s (%s)", job, n, n == 1 ? "" : "s",
                     nodes ? nodes : "?", nodes && !strcmp(nodes, "1") ? "" : "s",
                     ranks ? "-n" : "the allocation's SLURM_NTASKS");
        }
        if (hostfile) fprintf(stderr, "ztrain launch: note: --nodes %s is ignored inside a Slurm allocation\n", hostfile);
    } else {
        if (!on_path("mpirun"))
            die("no MPI launcher on PATH (mpirun not found): install Open MPI (scripts/install-deps.sh) or run inside "
                "a Slurm allocation");
        int hosts = hostfile ? count_hosts(hostfile) : 1;
        char gpus_txt[4096] = "";
        int gpus = zt_backend_list_gpus(gpus_txt, sizeof gpus_txt);
        int k; /* ranks per node */
        char why[256];
        if (ranks) {
            k = (ranks + hosts - 1) / hosts;
            snprintf(why, sizeof why, "-n %d", ranks);
        } else if (per_node) {
            k = per_node;
            snprintf(why, sizeof why, "--per-node %d", per_node);
        } else if (gpus > 0) {
            k = gpus;
            snprintf(why, sizeof why, "one rank per GPU: %d GPU%s", gpus, gpus == 1 ? "" : "s");
        } else {
            k = (cores + CPU_CORES_PER_RANK - 1) / CPU_CORES_PER_RANK;
            snprintf(why, sizeof why, "%s: one rank per up to %d cores, as fewer ranks mean less gradient traffic",
                     gpus == -2 ? "cpu-only build" : gpus == -1 ? "no usable GPU" : "no GPU", CPU_CORES_PER_RANK);
        }
        if (gpus > 0 && k > gpus)
            die("%d ranks per node but this node has %d GPU%s (one rank per GPU; use fewer ranks)", k, gpus,
                gpus == 1 ? "" : "s");
        int total = ranks ? ranks : k * hosts;
        int threads = cores / k < 1 ? 1 : cores / k;
        int over = k > cores;
        if (hosts > 1)
            snprintf(layout, sizeof layout, "%d ranks = %d nodes x %d, %d thread%s per rank (%s)", total, hosts, k,
                     threads, threads == 1 ? "" : "s", why);
        else
            snprintf(layout, sizeof layout, "%d rank%s x %d thread%s on %d core%s (%s)", total, total == 1 ? "" : "s",
                     threads, threads == 1 ? "" : "s", cores, cores == 1 ? "" : "s", why);
        if (geteuid() == 0) {
            c.env[c.n_env++] = "OMPI_ALLOW_RUN_AS_ROOT=1";
            c.env[c.n_env++] = "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1";
        }
        add(&c, "mpirun");
        add(&c, "-np");
        add(&c, "%d", total);
        if (hostfile) {
            add(&c, "--hostfile");
            add(&c, "%s", hostfile);
            if (!ranks) {
                add(&c, "--map-by");
                add(&c, "ppr:%d:node", k);
            }
        }
        /* one thread per rank on its own core; wider ranks (or too many) must not be pinned to one */
        add(&c, "--bind-to");
        add(&c, threads > 1 || over ? "none" : "core");
        if (over) add(&c, "--oversubscribe");
        if (geteuid() == 0 && hosts > 1) {
            add(&c, "-x");
            add(&c, "OMPI_ALLOW_RUN_AS_ROOT");
            add(&c, "-x");
            add(&c, "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM");
        }
    }
    add(&c, "%s", exe);
    for (int i = sep + 1; i < argc; i++) add(&c, "%s", argv[i]);

    printf("# layout: %s\n", layout);
    if (dry) {
        print_cmd(stdout, &c);
        return 0;
    }
    printf("# exec: ");
    print_cmd(stdout, &c);
    fflush(stdout);
    for (int i = 0; i < c.n_env; i++) putenv((char *)c.env[i]);
    execvp(c.argv[0], c.argv);
    die("cannot run %s: %s", c.argv[0], strerror(errno));
}
