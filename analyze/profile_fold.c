/*
 * analyze/profile_fold.c — whether a stream's samples may be folded per
 * (thread, stack, flags) while it is read (PROFILE_LOAD_AGGREGATED, see
 * analyze/profile.h), or must stay one row per sample.
 *
 * When the profile is aggregated a stream is read twice: this first pass
 * (records already in memory, no decoding beyond a SAMPLE's tail) only looks
 * for what needs samples one by one. A SAMPLE in an OpenMP region (threading
 * grafts a worker's sample onto its opener's sample nearest in time, any of
 * the opener's samples) or a COUNTER_SAMPLE (its values qualify the SAMPLE
 * before it) keeps the whole stream sample by sample; every other stream's
 * outputs are the same folded or not (tests/integration/test_report_streams.sh).
 * A stream with memory readings (MEM_TICK) keeps its samples with their times
 * while it is read (analyze/memory.c shares each interval's RSS growth among
 * the samples in it) and folds them into the profile's rows after: memory
 * then follows the largest stream's samples while reading, not all samples.
 */
#include <stdbool.h>
#include <string.h>

#include "analyze/profile_internal.h"
#include "format/format.h"

static int prescan_sample(void *ctx, void *arg, const struct opr_record *rec)
{
    (void)arg;
    uint64_t region = 0;
    size_t at = sizeof(struct opr_sample) + sizeof(struct opr_sample_python);
    if (rec->len >= at + sizeof(struct opr_sample_openmp))
        memcpy(&region, rec->body + at, sizeof region);
    if (region == 0)
        return 0;
    *(bool *)ctx = true;
    return -1; /* found: stop reading */
}

static int prescan_counter(void *ctx, void *arg, const struct opr_record *rec)
{
    (void)arg, (void)rec;
    *(bool *)ctx = true;
    return -1;
}

static int prescan_memory(void *ctx, void *arg, const struct opr_record *rec)
{
    (void)ctx, (void)rec;
    *(bool *)arg = true; /* not the end: an OpenMP region or counters may follow */
    return 0;
}

bool stream_wants_samples(const char *buf, size_t size, size_t header_size, bool *memory)
{
    bool wants = false;
    *memory = false;
    struct opr_reader r = {.ctx = &wants};
    if (opr_reader_on(&r, OPR_REC_SAMPLE, sizeof(struct opr_sample), prescan_sample, NULL) != 0 ||
        opr_reader_on(&r, OPR_REC_COUNTER_SAMPLE, sizeof(struct opr_counter_sample), prescan_counter, NULL) != 0 ||
        opr_reader_on(&r, OPR_REC_MEM_TICK, 0, prescan_memory, memory) != 0)
        return true;
    (void)opr_stream_read_records(&r, buf, size, header_size);
    return wants;
}
