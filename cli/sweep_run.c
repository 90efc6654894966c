/*
 * cli/sweep_run.c — running the combinations of `opprof sweep`: each one is
 * recorded with record_run into SWEEPDIR/NNN-<label>/ (its output beside it
 * in .out/.err), in a process group of its own so a hung run can be killed,
 * and its row filled from the runner's JSON line (or the wall time of a
 * plain command), the flop/byte formulas and its profile (hot kernel,
 * threads with samples). No shell anywhere: argv is built element by element.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "analyze/analyze.h"
#include "cli/sweep_internal.h"
#include "sampler/record/record.h"

#ifndef OPPROF_SRCDIR_TOOLS
#define OPPROF_SRCDIR_TOOLS "."
#endif
#ifndef OPPROF_PKGDATADIR
#define OPPROF_PKGDATADIR "/usr/local/share/opprof"
#endif

/* $OPPROF_OP_BENCH, then beside the binary (installed layout, build tree),
 * then the source tree and pkgdatadir baked in at build time. */
int sweep_find_runner(char *out, size_t outlen)
{
    const char *env = getenv("OPPROF_OP_BENCH");
    if (env && env[0]) {
        snprintf(out, outlen, "%s", env);
        return access(out, R_OK) == 0 ? 0 : -1;
    }
    /* libtool puts the real binary in .libs/ of the build tree */
    static const char *const beside[] = {"/../share/opprof/op_bench.py", "/tools/op_bench.py",
                                         "/../tools/op_bench.py"};
    if (path_beside_self(beside, sizeof beside / sizeof beside[0], out, outlen) == 0)
        return 0;
    snprintf(out, outlen, "%s/op_bench.py", OPPROF_SRCDIR_TOOLS);
    if (access(out, R_OK) == 0)
        return 0;
    snprintf(out, outlen, "%s/op_bench.py", OPPROF_PKGDATADIR);
    return access(out, R_OK) == 0 ? 0 : -1;
}

/* ---- counters ------------------------------------------------------------- */

/* Appends to a malloc'd, comma-separated string. -1 on out of memory. */
static int append_event(char **s, const char *text)
{
    size_t old = *s ? strlen(*s) : 0;
    char *g = realloc(*s, old + strlen(text) + 2);
    if (!g)
        return -1;
    if (old)
        g[old++] = ',';
    strcpy(g + old, text);
    *s = g;
    return 0;
}

char *sweep_events_string(const char *events, const char *metrics, char *err, size_t errlen, bool *bad)
{
    *bad = false;
    char *out = NULL;
    if (events && events[0] && append_event(&out, events) != 0)
        goto oom;
    if (metrics) {
        enum metric_set set;
        if (metric_set_parse(metrics, &set) != 0 || set == METRICS_NONE) {
            snprintf(err, errlen, "--metrics %s: use cpi, memory or cache", metrics);
            *bad = true;
            free(out);
            return NULL;
        }
        /* The preset's core events, grouped as the preset schedules them. */
        struct pmu_preset_event ev[16];
        size_t n = pmu_preset_events(set, pmu_core_pmu_name(), ev, 16);
        for (size_t i = 0; i < n; i++) {
            bool opens = i + 1 < n && ev[i + 1].grouped && !ev[i].grouped;
            bool closes = ev[i].grouped && !(i + 1 < n && ev[i + 1].grouped);
            char one[300];
            snprintf(one, sizeof one, "%s%.290s%s", opens ? "{" : "", ev[i].event, closes ? "}" : "");
            if (append_event(&out, one) != 0)
                goto oom;
        }
    }
    return out;
oom:
    snprintf(err, errlen, "out of memory");
    *bad = true;
    free(out);
    return NULL;
}

void sweep_counters_note(const char *events, char *out, size_t outlen)
{
    if (!events) {
        snprintf(out, outlen, "not requested (give -e EVENTS or --metrics cpi)");
        return;
    }
    struct pmu_event_list l = {0};
    char err[768];
    if (pmu_parse_events(events, &l, err, sizeof err) != 0) {
        snprintf(out, outlen, "%s", err); /* record says the same and fails every row */
        pmu_event_list_free(&l);
        return;
    }
    const struct pmu_event *hw = NULL;
    for (size_t i = 0; i < l.n && !hw; i++)
        if (l.ev[i].hardware)
            hw = &l.ev[i];
    if (!hw) {
        snprintf(out, outlen, "no hardware event among -e %s", events);
        pmu_event_list_free(&l);
        return;
    }
    /* Opened on ourselves, counting and disabled: only to learn whether this
     * machine has a PMU, as record itself checks before a run. */
    struct perf_event_attr a = hw->attr;
    a.disabled = 1;
    int fd = (int)syscall(SYS_perf_event_open, &a, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
    if (fd >= 0) {
        close(fd);
        snprintf(out, outlen, "%s can be counted here, but opprof record does not store counter values "
                              "per sample yet", hw->name);
    } else {
        pmu_unavailable_reason(errno, pmu_cpu_has_hypervisor_flag(), pmu_read_paranoid(), out, outlen);
    }
    pmu_event_list_free(&l);
}

/* ---- one run -------------------------------------------------------------- */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The last non-empty line of a file (trimmed) starting with want_prefix
 * (NULL: any), "" when none. */
static void last_line(const char *path, const char *want_prefix, char *out, size_t outlen)
{
    out[0] = '\0';
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    char line[4096];
    while (fgets(line, sizeof line, f)) {
        size_t n = strlen(line);
        while (n && (line[n - 1] == '\n' || line[n - 1] == '\r' || line[n - 1] == ' '))
            line[--n] = '\0';
        if (n && (!want_prefix || strncmp(line, want_prefix, strlen(want_prefix)) == 0))
            snprintf(out, outlen, "%s", line);
    }
    fclose(f);
}

/* record_run with the workload's stdout and stderr (and record's own
 * messages) sent to files; returns the exit status. */
static int record_redirected(struct record_options *ro, const char *out_path, const char *err_path)
{
    fflush(stdout);
    fflush(stderr);
    int fo = open(out_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int fe = open(err_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int save_out = dup(1), save_err = dup(2);
    if (fo < 0 || fe < 0 || save_out < 0 || save_err < 0) {
        fprintf(stderr, "opprof sweep: cannot write %s: %s\n", out_path, strerror(errno));
        if (fo >= 0) close(fo);
        if (fe >= 0) close(fe);
        if (save_out >= 0) close(save_out);
        if (save_err >= 0) close(save_err);
        return 2;
    }
    dup2(fo, 1);
    dup2(fe, 2);
    int rc = record_run(ro);
    fflush(stdout);
    fflush(stderr);
    dup2(save_out, 1);
    dup2(save_err, 2);
    close(save_out);
    close(save_err);
    close(fo);
    close(fe);
    return rc;
}

/* record_redirected in a child process of its own process group (the
 * workload inherits it), so that a run that hangs past timeout_s (0: no
 * limit) is killed as a whole. Returns the exit status, or -1 on a timeout. */
static int record_limited(struct record_options *ro, const char *out_path, const char *err_path, double timeout_s)
{
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0)
        return record_redirected(ro, out_path, err_path);
    if (pid == 0) {
        setpgid(0, 0);
        _exit(record_redirected(ro, out_path, err_path) & 0xff);
    }
    setpgid(pid, pid);
    double start = now_s();
    for (;;) {
        int st;
        pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid)
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        if (w < 0 && errno != EINTR)
            return 2;
        if (timeout_s > 0 && now_s() - start > timeout_s) {
            kill(-pid, SIGKILL);
            waitpid(pid, &st, 0);
            return -1;
        }
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

/* CPI and the LLC-miss bandwidth estimate of a row, from the per-sample
 * counters its record took (-e/--metrics), over the runner's timed calls when
 * it marked them (else the whole run). Left NaN without the counters; the
 * row's counters note says why. */
static void row_counter_metrics(struct sweep_row *r, struct profile *p)
{
    if (!p->counters || p->counters->n == 0)
        return;
    profile_keep_samples_under(p, "op_bench_timed_calls"); /* no-op when unmarked */
    size_t nkeys = 0, width = p->counters->n * COUNTER_SUMS;
    double *byk = counters_fold(p, false, &nkeys);
    if (!byk)
        return;
    double *sums = calloc(width, sizeof *sums);
    if (sums) {
        for (size_t k = 0; k < nkeys; k++)
            for (size_t j = 0; j < width; j++)
                sums[j] += byk[k * width + j];
        uint64_t weight = 0;
        for (size_t i = 0; i < p->nsamples; i++)
            weight += p->samples[i].weight;
        struct counter_metrics m;
        counter_metrics_compute(p->counters, sums, (double)weight * (double)p->period_ns / 1e9, &m);
        r->cpi = m.cpi;
        r->bandwidth_gbps = m.bandwidth_est / 1e9;
        free(sums);
    }
    free(byk);
}

/* Hot kernel and active threads of a row's profile. A result that cannot be
 * read leaves them empty (the row's own note says why the run failed); out
 * of memory is -1 with errno ENOMEM, so the sweep stops with one line and
 * exit 2 rather than print rows that silently lack their columns. */
static int analyze_row(struct sweep_row *r, enum sweep_op op)
{
    struct profile *p = NULL;
    char err[512];
    if (profile_load(r->dir, &p, err, sizeof err) != 0)
        return errno == ENOMEM ? -1 : 0;
    for (size_t i = 0; i < p->nthreads; i++)
        r->threads_active += p->threads[i].samples > 0;
    char opname[256];
    struct hotspot_table t;
    bool done = false;
    if (op != SWEEP_OP_UNKNOWN && hotspots_find_operator(p, sweep_op_name(op), opname, sizeof opname) &&
        hotspots_op_neighbours(p, opname, true, &t) == 0) {
        hotspots_sort(&t, SORT_TOTAL);
        if (t.nrows && t.share_denominator) {
            snprintf(r->kernel, sizeof r->kernel, "%s", t.rows[0].name);
            r->kernel_share = (double)t.rows[0].total / (double)t.share_denominator;
            done = true;
        }
        hotspots_free(&t);
    }
    if (!done) {
        if (hotspots_compute(p, GROUP_FUNCTION, &t) != 0) {
            profile_free(p);
            errno = ENOMEM;
            return -1;
        }
        hotspots_sort(&t, SORT_SELF);
        if (t.nrows && t.total_weight) {
            snprintf(r->kernel, sizeof r->kernel, "%s", t.rows[0].name);
            r->kernel_share = (double)t.rows[0].self / (double)t.total_weight;
        }
        hotspots_free(&t);
    }
    row_counter_metrics(r, p);
    profile_free(p);
    return 0;
}

/* Where a row sits in the plot: x is its value of the first parameter that
 * takes several values, the series its values of the other varying ones. */
struct row_place {
    const char *x, *x_name;
    char series[96];
};

/* Records one combination (argv built by the caller) and fills its row. */
static int run_one(struct sweep_ctx *c, const char *label, const struct row_place *place, char **argv,
                   enum sweep_op op, double flops, double bytes, int threads)
{
    if (c->nrows == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 8;
        struct sweep_row *g = realloc(c->rows, cap * sizeof *g);
        if (!g)
            return -1;
        c->rows = g;
        c->cap = cap;
    }
    struct sweep_row *r = &c->rows[c->nrows];
    memset(r, 0, sizeof *r);
    r->median_s = r->min_s = r->max_s = NAN;
    r->cpi = r->bandwidth_gbps = NAN;
    r->threads = threads;
    snprintf(r->label, sizeof r->label, "%s", label);
    snprintf(r->x, sizeof r->x, "%s", place->x);
    snprintf(r->x_name, sizeof r->x_name, "%s", place->x_name);
    snprintf(r->series, sizeof r->series, "%s", place->series);
    snprintf(r->counters, sizeof r->counters, "%s", c->counters);
    char safe[160], outp[PATH_MAX + 8], errp[PATH_MAX + 8];
    sweep_sanitize_label(label, safe, sizeof safe);
    snprintf(r->dir, sizeof r->dir, "%s/%03zu-%s", c->sweepdir, c->nrows, safe);
    snprintf(outp, sizeof outp, "%s.out", r->dir);
    snprintf(errp, sizeof errp, "%s.err", r->dir);
    c->nrows++;
    fprintf(stderr, "opprof sweep: [%zu] %s\n", c->nrows, label);

    struct record_options ro = {.frequency_hz = 1000, .output_dir = r->dir, .call_graph = CALL_GRAPH_DWARF,
                                .argv = argv, .quiet = true, .events = c->events};
    double t0 = now_s();
    int st = record_limited(&ro, outp, errp, c->timeout_s);
    if (st == -1) {
        /* A hung run (e.g. a sample taken inside the dynamic loader) is tried
         * once more, into a fresh directory. */
        fprintf(stderr, "opprof sweep: %s hung for %.0f s: killed, trying once more\n", label, c->timeout_s);
        strncat(r->dir, "-retry", sizeof r->dir - strlen(r->dir) - 1);
        snprintf(outp, sizeof outp, "%s.out", r->dir);
        snprintf(errp, sizeof errp, "%s.err", r->dir);
        ro.output_dir = r->dir;
        t0 = now_s();
        st = record_limited(&ro, outp, errp, c->timeout_s);
    }
    double wall = now_s() - t0;
    if (st == -1) {
        snprintf(r->reason, sizeof r->reason, "timed out twice after %.0f s (killed)", c->timeout_s);
    } else if (st > 128 && st < 128 + 65) {
        /* record is quiet here: say how the command died, not its last words */
        snprintf(r->reason, sizeof r->reason, "the command was killed by signal %d (%s); its output: %s.err",
                 st - 128, strsignal(st - 128), r->dir);
    } else if (st != 0) {
        last_line(errp, NULL, r->reason, sizeof r->reason);
        if (!r->reason[0])
            snprintf(r->reason, sizeof r->reason, "exit status %d", st);
        else {
            /* The last words (the command's, or record's); say how it ended too. */
            size_t l = strlen(r->reason);
            snprintf(r->reason + l, sizeof r->reason - l, " (exit status %d)", st);
        }
    } else if (op != SWEEP_OP_UNKNOWN) {
        char json[4096];
        double calls = 0;
        last_line(outp, "{", json, sizeof json);
        if (sweep_json_number(json, "median_s", &r->median_s) && sweep_json_number(json, "min_s", &r->min_s) &&
            sweep_json_number(json, "max_s", &r->max_s))
            r->ok = true;
        else
            snprintf(r->reason, sizeof r->reason, "the runner printed no timing line (see %.400s)", outp);
        if (!sweep_json_number(json, "p25_s", &r->p25_s) || !sweep_json_number(json, "p75_s", &r->p75_s))
            r->p25_s = r->p75_s = 0;
        if (sweep_json_number(json, "repeat", &calls) && calls > 0)
            r->calls = (unsigned)calls;
    } else {
        r->median_s = wall; /* one call: the whole command, no spread */
        r->calls = 1;
        r->ok = true;
    }
    if (!r->ok)
        c->any_failed = true;
    sweep_row_derive(r, flops, bytes);
    return analyze_row(r, op);
}

/* ---- the combinations ----------------------------------------------------- */

/* place->x and place->series from the value index idx[k] of each of the np
 * dimensions (names[k] prefixes a value in the series when not NULL; titles[k]
 * names the dimension on the x axis). */
static void place_row(struct row_place *place, char **const *values, const size_t *nvalues,
                      const char *const *names, const char *const *titles, const size_t *idx, size_t np)
{
    size_t xdim = 0;
    while (xdim < np && nvalues[xdim] < 2)
        xdim++;
    if (xdim == np)
        xdim = 0;
    place->x = values[xdim][idx[xdim]];
    place->x_name = titles[xdim];
    place->series[0] = '\0';
    for (size_t k = 0; k < np; k++) {
        if (k == xdim || nvalues[k] < 2)
            continue;
        size_t l = strlen(place->series);
        snprintf(place->series + l, sizeof place->series - l, "%s%s%s%s", l ? " " : "", names[k] ? names[k] : "",
                 names[k] ? "=" : "", values[k][idx[k]]);
    }
}

static int run_params_at(struct sweep_ctx *c, struct sweep_param *ps, size_t np, size_t k, size_t *idx, char **cmd,
                         size_t ncmd)
{
    if (k < np) {
        for (size_t i = 0; i < ps[k].nvalues; i++) {
            idx[k] = i;
            if (run_params_at(c, ps, np, k + 1, idx, cmd, ncmd) != 0)
                return -1;
        }
        return 0;
    }
    char label[160] = "";
    char **values[SWEEP_MAX_PARAMS];
    size_t nvalues[SWEEP_MAX_PARAMS];
    const char *names[SWEEP_MAX_PARAMS];
    for (size_t j = 0; j < np; j++) {
        size_t l = strlen(label);
        snprintf(label + l, sizeof label - l, "%s%s=%s", j ? "," : "", ps[j].name, ps[j].values[idx[j]]);
        values[j] = ps[j].values;
        nvalues[j] = ps[j].nvalues;
        names[j] = ps[j].name;
    }
    struct row_place place;
    place_row(&place, values, nvalues, names, names, idx, np);
    char **argv = calloc(ncmd + 1, sizeof *argv);
    if (!argv)
        return -1;
    int rc = 0;
    for (size_t a = 0; a < ncmd && rc == 0; a++) {
        char *cur = strdup(cmd[a]);
        for (size_t j = 0; j < np && cur; j++) {
            char *next = sweep_substitute(cur, ps[j].name, ps[j].values[idx[j]]);
            free(cur);
            cur = next;
        }
        if (!(argv[a] = cur))
            rc = -1;
    }
    if (rc == 0)
        rc = run_one(c, label, &place, argv, SWEEP_OP_UNKNOWN, -1, 0, 0);
    for (size_t a = 0; a < ncmd; a++)
        free(argv[a]);
    free(argv);
    return rc;
}

int sweep_run_params(struct sweep_ctx *c, struct sweep_param *ps, size_t np, char **cmd, size_t ncmd)
{
    size_t idx[SWEEP_MAX_PARAMS] = {0};
    return run_params_at(c, ps, np, 0, idx, cmd, ncmd);
}

int sweep_run_ops(struct sweep_ctx *c, const struct sweep_op_spec *s)
{
    char w[16], rp[16], mt[32];
    snprintf(w, sizeof w, "%d", s->warmup);
    snprintf(rp, sizeof rp, "%d", s->repeat);
    snprintf(mt, sizeof mt, "%g", s->min_time_s);
    static char *default_threads[] = {"0"};
    char **threads = s->nthreads ? s->threads : default_threads;
    size_t nt = s->nthreads ? s->nthreads : 1;
    /* Plot dimensions in order of preference for the x axis. */
    char **const values[3] = {s->shapes, threads, s->dtypes};
    const size_t nvalues[3] = {s->nshapes, nt, s->ndtypes};
    const char *const names[3] = {NULL, "threads", NULL};
    const char *const titles[3] = {"shape", "threads", "dtype"};
    for (size_t sh = 0; sh < s->nshapes; sh++)
        for (size_t d = 0; d < s->ndtypes; d++)
            for (size_t t = 0; t < nt; t++) {
                const char *th = threads[t];
                char label[160];
                snprintf(label, sizeof label, "%s %s %s%s%s", sweep_op_name(s->op), s->shapes[sh], s->dtypes[d],
                         s->nthreads ? " t" : "", s->nthreads ? th : "");
                size_t idx[3] = {sh, t, d};
                struct row_place place;
                place_row(&place, values, nvalues, names, titles, idx, 3);
                long dims[SWEEP_MAX_DIMS];
                int nd = 0;
                double flops = -1, bytes = 0;
                char err[256];
                size_t es = sweep_dtype_size(s->dtypes[d]);
                if (sweep_parse_shape(s->op, s->shapes[sh], dims, &nd, err, sizeof err) == 0 && es)
                    sweep_op_counts(s->op, dims, nd, es, &flops, &bytes);
                /* The runner checks op, shape and dtype itself: its one-line
                 * reason becomes the row's. */
                char *argv[] = {(char *)s->python, (char *)s->runner, "--op", (char *)s->op_text, "--shape",
                                s->shapes[sh], "--dtype", s->dtypes[d], "--threads", (char *)th, "--warmup", w,
                                "--repeat", rp, "--min-time", mt, NULL};
                if (run_one(c, label, &place, argv, s->op, flops, bytes, atoi(th)) != 0)
                    return -1;
            }
    return 0;
}
