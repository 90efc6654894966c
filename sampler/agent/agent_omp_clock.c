/*
 * sampler/agent/agent_omp_clock.c — OpenMP region events on the TSC: which
 * clock the hooks read, and how the writer turns TSC ticks into the
 * CLOCK_MONOTONIC ns of every other record.
 *
 * HOT PATH: omp_choose_event_clock runs once, at a process's first region
 * event, on a workload thread. The rest runs in the writer (its lock held).
 */
#include <fcntl.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>
#include <x86intrin.h> /* __rdtsc */

#include "sampler/agent/agent.h"
#include "sampler/agent/agent_ompt.h"
#include "sampler/agent/unwind_table.h"

/* Region begin/end times (and the opener contexts' times) are read with the
 * TSC where the kernel keeps CLOCK_MONOTONIC on it (clocksource "tsc": the
 * TSC is invariant and in step across CPUs there), and the writer turns them
 * into CLOCK_MONOTONIC ns against a (clock, TSC) pair it reads at each drain
 * (omp_rec_event_ns). A clock_gettime at a region's begin and end was
 * ~0.075 us of every region on this VM (omp_regions_gomp, 100,000 regions
 * under record -F 10: 171.0 -> 163.5 ms of CPU, 5 runs), and the opener's
 * part of it delays the whole team. Elsewhere: clock_gettime, as before.
 * Decided at the first event by whichever thread gets there (every thread
 * finds the same answer), before any event is pushed: the writer, which
 * sees an event only after its push, finds the clock decided. */
_Atomic int omp_events_clock;

/* Whether CLOCK_MONOTONIC runs on the TSC here (see omp_events_clock); needs
 * the unwinder's TSC calibration (constructor). */
int omp_choose_event_clock(void)
{
    int clock = OMP_EVENT_CLOCK_MONOTONIC;
    int fd = unwind_tsc0
                 ? open("/sys/devices/system/clocksource/clocksource0/current_clocksource", O_RDONLY | O_CLOEXEC)
                 : -1;
    if (fd >= 0) {
        char name[16] = {0};
        ssize_t n = read(fd, name, sizeof name - 1);
        close(fd);
        if (n == 4 && memcmp(name, "tsc\n", 4) == 0)
            clock = OMP_EVENT_CLOCK_TSC;
    }
    atomic_store_explicit(&omp_events_clock, clock, memory_order_relaxed);
    return clock;
}

/* Nanoseconds per TSC tick, from the unwinder's calibration taken in the
 * constructor (unwind_table.h) to now; 0 when there is none yet. */
double omp_tsc_ns_per_tick(void)
{
    uint64_t ns = agent_now_ns() - unwind_ns0, tsc = __rdtsc() - unwind_tsc0;
    if (unwind_tsc0 == 0 || ns == 0 || tsc == 0)
        return 0;
    return (double)ns / (double)tsc;
}

/* Writer: the (CLOCK_MONOTONIC, TSC) pair event times are turned into ns
 * against, and the TSC rate. The pair is read again at each drain and
 * whenever it is older than EVENT_ANCHOR_MAX_NS, so an event is converted
 * against a pair at most a drain or two away from it: a change in NTP's
 * correction of the clock during the run (at most 0.05 %) moves it by at
 * most 0.05 % of that distance, 10 us in the worst case and well under 1 us
 * for the few-ppm corrections NTP makes in practice.
 *
 * Each pair is read as TSC, clock, TSC, the tightest of three tries, the
 * clock taken at the middle: a pair read as clock then TSC (or with the
 * vDSO's first call, which faults its data page in) was off by up to tens of
 * us when the writer was interrupted in between, and the rate taken between
 * such pairs put region ends 0.2-5.8 us (mean 0.7-1.1) after a clock read
 * made beside them (omp_regions_gomp, 200,000 regions, two runs). The rate
 * runs from the writer's first pair (event_origin) once that is
 * EVENT_RATE_MIN_NS old; before, the unwinder's calibration serves. So
 * read, region ends came out 0.07-0.11 us before such a clock read on
 * average (the read's own time: it comes after the TSC's) and within
 * -0.4..+1.5 us of it in the first ~15 ms, on the unwinder's rate
 * (omp_regions_gomp, 2,000,000 regions, three runs; the few reads tens of
 * us away were threads preempted between the two reads). */
#define EVENT_ANCHOR_MAX_NS 20000000ull
#define EVENT_RATE_MIN_NS 5000000ull
static struct agent_clock_pair event_origin;
static struct omp_clock_anchor event_anchor;

struct omp_clock_anchor omp_event_anchor_take(void)
{
    struct agent_clock_pair p = agent_clock_pair_now();
    if (event_origin.tsc == 0)
        event_origin = p;
    event_anchor.ns = p.ns;
    event_anchor.tsc = p.tsc;
    if (p.ns > event_origin.ns + EVENT_RATE_MIN_NS && p.tsc > event_origin.tsc)
        event_anchor.ns_per_tick = (double)(p.ns - event_origin.ns) / (double)(p.tsc - event_origin.tsc);
    else
        event_anchor.ns_per_tick = omp_tsc_ns_per_tick();
    return event_anchor;
}

/* An event time in ns against the last pair taken. */
uint64_t omp_event_ns_at_anchor(uint64_t t)
{
    if (atomic_load_explicit(&omp_events_clock, memory_order_relaxed) != OMP_EVENT_CLOCK_TSC)
        return t;
    double d = (double)(int64_t)(t - event_anchor.tsc) * event_anchor.ns_per_tick;
    return (uint64_t)((int64_t)event_anchor.ns + (int64_t)d);
}

/* The same from anywhere in the writer: a fresh anchor when it is old. */
uint64_t omp_rec_event_ns(uint64_t t)
{
    if (atomic_load_explicit(&omp_events_clock, memory_order_relaxed) != OMP_EVENT_CLOCK_TSC)
        return t;
    uint64_t now_tsc = __rdtsc();
    if (event_anchor.tsc == 0 ||
        (double)(now_tsc - event_anchor.tsc) * event_anchor.ns_per_tick > (double)EVENT_ANCHOR_MAX_NS)
        omp_event_anchor_take();
    return omp_event_ns_at_anchor(t);
}
