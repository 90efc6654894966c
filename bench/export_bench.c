/*
 * bench/export_bench.c — how long `opprof export` takes per format on a big
 * profile: a synthetic 1M-sample profile built in memory (8 threads, ~4,000
 * distinct stacks 12-40 frames deep over Python, ATen, OpenMP and native
 * frames), each format written to a temp file. Prints seconds and size per
 * format. Not a test: a number to compare in a PR note.
 *
 *   gcc -std=gnu11 -O2 -D_GNU_SOURCE -I. -IBUILD bench/export_bench.c \
 *       BUILD/.libs/libopprof_core.a $(pkg-config --libs libdw libelf) -lpfm -lstdc++ -lpthread -lm
 *   ./a.out [SAMPLES]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "analyze/analyze.h"
#include "report/report.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* xorshift: the same profile every run. */
static uint64_t rng = 88172645463325252ull;
static uint32_t next(uint32_t n)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng % n);
}

static struct profile *build(size_t nsamples)
{
    struct profile *p = profile_new_empty();
    p->command = strdup("synthetic benchmark profile");
    enum { NPY = 300, NOP = 120, NOMP = 20, NNAT = 600 };
    uint32_t py[NPY], op[NOP], omp[NOMP], nat[NNAT];
    char name[128], file[64];
    for (int i = 0; i < NPY; i++) {
        snprintf(name, sizeof name, "Module%d.forward", i);
        snprintf(file, sizeof file, "/srv/model/layer%d.py", i % 40);
        py[i] = profile_add_frame(p, name, file + 11, file, 10 + i, FRAME_PYTHON);
    }
    for (int i = 0; i < NOP; i++) {
        snprintf(name, sizeof name, "at::_ops::op%d::call(at::Tensor const&, at::Tensor const&)", i);
        op[i] = profile_add_frame(p, name, "libtorch_cpu.so", NULL, 0, FRAME_NATIVE);
    }
    for (int i = 0; i < NOMP; i++) {
        snprintf(name, sizeof name, "gomp_fn_%d", i);
        omp[i] = profile_add_frame(p, name, "libgomp.so.1", NULL, 0, FRAME_NATIVE);
    }
    for (int i = 0; i < NNAT; i++) {
        snprintf(name, sizeof name, "native_kernel_%d<float>", i);
        nat[i] = profile_add_frame(p, name, i % 3 ? "libtorch_cpu.so" : "libblas.so.3", NULL, 0, FRAME_NATIVE);
    }
    enum { NSTACKS = 4000 };
    uint32_t *stacks = malloc(NSTACKS * sizeof *stacks);
    uint32_t frames[64];
    for (int s = 0; s < NSTACKS; s++) {
        uint32_t depth = 12 + next(29), k = 0;
        /* leaf first: native, maybe OpenMP, an operator, then Python callers */
        frames[k++] = nat[next(NNAT)];
        if (next(4) == 0)
            frames[k++] = omp[next(NOMP)];
        frames[k++] = op[next(NOP)];
        while (k < depth - 2)
            frames[k++] = py[next(NPY)];
        frames[k++] = nat[0];
        frames[k++] = nat[1];
        stacks[s] = profile_add_stack(p, frames, k);
    }
    uint32_t threads[8];
    for (int t = 0; t < 8; t++)
        threads[t] = profile_add_thread(p, 1000, 1000 + t, t ? "omp-worker" : "python");
    /* Skewed stack popularity, as in real profiles. */
    for (size_t i = 0; i < nsamples; i++) {
        uint32_t s = next(NSTACKS);
        if (next(2))
            s %= 200;
        profile_add_sample(p, 1000000000ull + i * 250000ull, threads[i % 8], stacks[s], 1);
    }
    free(stacks);
    return p;
}

int main(int argc, char **argv)
{
    size_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : 1000000;
    double t0 = now();
    struct profile *p = build(n);
    printf("export_bench: %zu samples, %zu stacks, %zu frames, 8 threads (built in %.2f s)\n", p->nsamples,
           p->nstacks, p->nframes, now() - t0);
    char dir[] = "/tmp/opprof-export-bench.XXXXXX";
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    static const char *const names[] = {"folded", "flamegraph", "speedscope", "chrome-trace", "pstats", "html"};
    struct export_options o = {.online_cpus = 2};
    double sum = 0;
    printf("%-14s %9s %12s\n", "format", "seconds", "size");
    for (int f = 0; f < 6; f++) {
        char path[256];
        snprintf(path, sizeof path, "%s/out.%s", dir, names[f]);
        FILE *out = fopen(path, "w");
        if (!out) {
            perror(path);
            return 1;
        }
        char err[256];
        const struct profile *ps[1] = {p};
        double a = now();
        int rc;
        switch (f) {
        case 0: rc = export_folded(out, p); break;
        case 1: rc = export_flamegraph(out, p, &o, false); break;
        case 2: rc = export_speedscope(out, p); break;
        case 3: rc = export_chrome_trace(out, ps, &o, 1); break;
        case 4: rc = export_pstats(out, p, err, sizeof err); break;
        default: rc = export_html(out, p, &o); break;
        }
        fclose(out);
        double secs = now() - a;
        sum += secs;
        struct stat st;
        stat(path, &st);
        printf("%-14s %9.3f %9.1f MB%s\n", names[f], secs, st.st_size / 1e6, rc ? "  (FAILED)" : "");
        unlink(path);
    }
    printf("%-14s %9.3f\n", "all six", sum);
    rmdir(dir);
    profile_free(p);
    return 0;
}
