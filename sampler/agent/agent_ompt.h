/*
 * sampler/agent/agent_ompt.h — the OMPT tool inside the agent (libopprof_agent.so), as seen
 * by the rest of the agent.
 *
 * The tool (ompt_tool.c) exports ompt_start_tool, so an OpenMP runtime that
 * speaks OMPT (LLVM libomp, Intel libiomp5; GNU libgomp does not) hands it its
 * callbacks. The callbacks run on the workload's threads, on the hot path of
 * every parallel region: they only update thread-local counters and push
 * 32-byte events into a per-thread single-producer ring. The writer thread
 * (agent_writer.c) drains the rings every ~10 ms through ompt_writer_drain(),
 * which aggregates them into OMP_TICK records and writes an OMP_REGION record
 * for each region that a sample was taken in (ompt_writer_note_sample_region).
 *
 * The SIGTRAP handler reads agent_omp_region, the sampled thread's current
 * parallel region id: an initial-exec TLS variable (a plain load from %fs,
 * safe in a signal handler).
 *
 * Nothing here may be included from outside sampler/ and ompt/.
 */
#ifndef OPPROF_OMPT_H
#define OPPROF_OMPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define OMPT_HIDDEN __attribute__((visibility("hidden")))

/* The writer's record emitter: header + body + tail, padded to 8 bytes. */
typedef void (*agent_emit_fn)(uint32_t type, const void *body, size_t body_len, const void *tail,
                              size_t tail_len);

/* Current parallel region id of this thread (0: none). Read by the handler. */
extern __thread uint64_t agent_omp_region __attribute__((tls_model("initial-exec")));

/* High bit of agent_omp_region (and so of a SAMPLE's omp_region tail): the
 * thread is a member of an OpenMP team but outside any region body, i.e. in
 * the runtime (spin, barrier, fork/join, idle wait). The low bits keep the
 * last region it served. Set only by the GNU libgomp path (agent_gomp.c),
 * where no runtime symbol can be trusted to say so (libgomp is stripped). */
#define AGENT_OMP_OUTSIDE_BODY (1ull << 63)

/* Recording entry points shared by the OMPT callbacks and agent_gomp.c (hot
 * path, workload threads; no locks, no malloc after a thread's first call). */
OMPT_HIDDEN void omp_rec_gomp_activate(void);              /* libgomp seen: start the writer side */
/* tsc: the TSC read at the hook's start (omp_rec_hook_now), the event's time */
OMPT_HIDDEN uint64_t omp_rec_region_begin(unsigned requested, uint64_t tsc); /* opener: new id, BEGIN, context */
OMPT_HIDDEN void omp_rec_region_end(uint64_t id, unsigned actual, uint64_t tsc);
/* A team thread's region body, timed with one TSC read at each edge: begin
 * ends the hook time since *t (and pauses an enclosing body there), end
 * starts the hook time after the body; both set *t to the read. */
OMPT_HIDDEN bool omp_rec_thread_seen(void); /* false: this thread's first region */
OMPT_HIDDEN void omp_rec_body_begin(uint64_t *t);
OMPT_HIDDEN void omp_rec_body_end(uint64_t *t);
OMPT_HIDDEN void omp_rec_thread_end(void);
/* The agent's own time on a workload thread around a region (the wrapper's
 * or callback's work, not the region's), in TSC ticks since *start, added to
 * this thread's count; *start is set to now. See agent_ompt.c. */
OMPT_HIDDEN void omp_rec_hook_time(uint64_t *start);
OMPT_HIDDEN uint64_t omp_rec_hook_now(void);
/* One-time work on a workload thread outside any hook (agent_gomp.c
 * resolving a GOMP_* entry point: dlsym, dladdr), in TSC ticks. */
OMPT_HIDDEN void omp_rec_setup_time(uint64_t ticks);
/* Writer: that time on every thread so far, in ns (0: no OpenMP seen). */
OMPT_HIDDEN uint64_t ompt_hook_ns(void);
/* agent_gomp.c: what libgomp's spinning team threads waited through the
 * openers' hooks, in ns (see gomp_team_wait) */
OMPT_HIDDEN uint64_t gomp_team_wait_ns(void);
OMPT_HIDDEN void gomp_atfork_child(void);
/* false under record --no-openmp-regions (OPPROF_OMP_REGIONS=0): the GOMP_*
 * wrappers only forward and the OMPT tool declines (agent_gomp.c) */
OMPT_HIDDEN bool omp_regions_wanted(void);

/* Region event times (agent_omp_clock.c): the clock the hooks read, decided
 * at a process's first event (omp_choose_event_clock, which returns it). */
enum { OMP_EVENT_CLOCK_UNKNOWN = 0, OMP_EVENT_CLOCK_TSC = 1, OMP_EVENT_CLOCK_MONOTONIC = 2 };
OMPT_HIDDEN extern _Atomic int omp_events_clock;
OMPT_HIDDEN int omp_choose_event_clock(void);
/* Writer: a (CLOCK_MONOTONIC ns, TSC) pair read now and the TSC rate; event
 * times are converted against the last one taken (omp_event_ns_at_anchor),
 * or against a fresh one when it is old (omp_rec_event_ns): a region
 * event's or opener context's time in CLOCK_MONOTONIC ns. */
struct omp_clock_anchor {
    uint64_t ns, tsc;
    double ns_per_tick;
};
OMPT_HIDDEN struct omp_clock_anchor omp_event_anchor_take(void);
OMPT_HIDDEN uint64_t omp_event_ns_at_anchor(uint64_t t);
OMPT_HIDDEN uint64_t omp_rec_event_ns(uint64_t t);
/* ns per TSC tick from the unwinder's calibration (constructor) to now; 0: none. */
OMPT_HIDDEN double omp_tsc_ns_per_tick(void);

/* Writer: an opener's event ring is half full (the flag is cleared): drain
 * the rings now. */
OMPT_HIDDEN int ompt_drain_wanted_take(void);

/* Writer thread, writer lock held. */
OMPT_HIDDEN void ompt_writer_note_sample_region(uint64_t region_id, agent_emit_fn emit);
/* Writer: an opener's full context (AGENT_SLOT_OMP_CONTEXT) was not written
 * (--max-size, out of memory): later regions must not say they repeat it. */
OMPT_HIDDEN void ompt_writer_context_lost(void);
OMPT_HIDDEN void ompt_writer_drain(agent_emit_fn emit, bool final);
/* In a fork child: the parent's rings and regions are not ours. */
OMPT_HIDDEN void ompt_atfork_child(void);
/* 1 once a runtime called ompt_start_tool and the callbacks are registered. */
OMPT_HIDDEN int ompt_tool_active(void);

/* sampler/agent_threads.c: the OS-level thread view (schedstat), polled by
 * the writer thread; final: also re-read context switches, always emit. */
OMPT_HIDDEN void agent_threads_poll(agent_emit_fn emit, bool final);
/* Whether the last poll found no thread that ran, waited on a runqueue,
 * started or ended since the poll before (the writer sleeps longer then). */
OMPT_HIDDEN bool agent_threads_quiet(void);
/* Whether the last poll found that no thread was switched in (it stayed on
 * its CPU, or off it, or left it once) and none started or ended (the
 * writer drains less often then). */
OMPT_HIDDEN bool agent_threads_steady(void);
OMPT_HIDDEN void agent_threads_atfork_child(void);
/* The writer thread's tid, set by the writer before anything polls. */
OMPT_HIDDEN void agent_threads_set_writer(uint32_t tid);

#endif
