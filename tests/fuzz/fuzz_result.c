/*
 * tests/fuzz/fuzz_result.c — libFuzzer targets over a result directory, the
 * untrusted input `opprof report` reads (issue 18):
 *   FUZZ_STREAM  the input is one proc-<pid>-<gen>.raw stream beside a fixed,
 *                valid info file: the stream reader and every record handler;
 *   FUZZ_INFO    the input is the info file beside a fixed, valid stream.
 * Each input is written into a private directory on tmpfs and loaded twice:
 * with profile_load() (sample by sample, as the timeline exports load) and
 * with profile_load_as(PROFILE_LOAD_AGGREGATED) (folded per thread and stack,
 * as the report loads); both must count the same samples, weight, stacks and
 * threads (abort otherwise). Each profile is then walked by a few hotspot
 * tables, so what is built from it runs too.
 * Built by tests/fuzz/build.sh with clang's -fsanitize=fuzzer,address,undefined.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analyze/analyze.h"

static char fuzz_dir[256];

/* A valid info file: the keys a `record` writes, for a finished run. */
static const char good_info[] =
    "format=opprof-raw 1\nopprof_version=0.1.0\ncommand=fuzz\nhostname=fuzz\nevent=task-clock\n"
    "user_only=0\nfrequency_hz=1000\nperiod_ns=1000000\ncall_graph=dwarf\nstart_ns=1\nend_ns=2000000001\n"
    "start_time=0\nonline_cpus=2\nexit_status=0\nexit_signal=0\ncomplete=1\n";

/* For FUZZ_INFO the stream beside the info file is the smallest valid one:
 * the file header and an END record (built from format.h's structs). */
static unsigned char good_stream[sizeof(struct opr_file_header) + sizeof(struct opr_record_header) +
                                 sizeof(struct opr_end)];

static void build_good_stream(void)
{
    struct opr_file_header h = {.version = OPR_FORMAT_VERSION, .header_size = sizeof h, .pid = 1,
                                .period_ns = 1000000};
    memcpy(h.magic, OPR_FILE_MAGIC, sizeof h.magic);
    struct opr_record_header r = {.type = OPR_REC_END, .size = sizeof r + sizeof(struct opr_end)};
    struct opr_end e = {.time_ns = 2000000000};
    memcpy(good_stream, &h, sizeof h);
    memcpy(good_stream + sizeof h, &r, sizeof r);
    memcpy(good_stream + sizeof h + sizeof r, &e, sizeof e);
}

static int write_file(const char *name, const void *data, size_t len)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", fuzz_dir, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    const char *p = data;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n <= 0) {
            close(fd);
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return close(fd);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(fuzz_dir, sizeof fuzz_dir, "%s/opprof-fuzz.XXXXXX", base);
    if (!mkdtemp(fuzz_dir)) {
        perror("fuzz_result: mkdtemp");
        exit(1);
    }
    build_good_stream();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
#ifdef FUZZ_INFO
    if (write_file("info", data, size) != 0 || write_file("proc-1-0.raw", good_stream, sizeof good_stream) != 0)
        abort();
#else
    if (write_file("info", good_info, sizeof good_info - 1) != 0 || write_file("proc-1-0.raw", data, size) != 0)
        abort();
#endif
    /* Both ways of loading: sample by sample (profile_load, the timeline
     * exports') and folded per thread and stack (the report's). They must
     * agree on what they count, whatever the input. */
    struct profile *p = NULL, *folded = NULL;
    char err[512];
    int rc = profile_load(fuzz_dir, &p, err, sizeof err);
    int rc_folded = profile_load_as(fuzz_dir, PROFILE_LOAD_AGGREGATED, &folded, err, sizeof err);
    if (rc != rc_folded)
        abort();
    if (rc == 0 && (p->sample_count != folded->sample_count || p->total_weight != folded->total_weight ||
                    p->nstacks != folded->nstacks || p->nthreads != folded->nthreads))
        abort();
    static const enum group_by keys[] = {GROUP_FUNCTION, GROUP_MODULE, GROUP_THREAD, GROUP_OP, GROUP_PYTHON};
    for (int which = 0; which < 2 && rc == 0; which++) {
        for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
            struct hotspot_table t = {0};
            if (hotspots_compute(which ? folded : p, keys[k], &t) == 0)
                hotspots_free(&t);
        }
    }
    profile_free(p);
    profile_free(folded);
    return 0;
}
