/*
 * sampler/agent/agent_tick.c — `record --timer tick`: one POSIX CPU-time
 * timer per thread instead of the inherited perf_event task-clock event.
 *
 * Why: the task-clock event samples with an hrtimer that the kernel starts
 * when the thread is switched in and cancels when it is switched out. On a
 * virtual machine each start and cancel programs the timer device, a VM exit:
 * a two-thread pipe ping-pong (200,000 switches) took 2.05-2.20 s of CPU bare
 * and 3.04-3.23 s with that event and a handler that only counts; the same
 * event opened for counting only (no hrtimer) cost nothing. A thread CPU-time
 * timer costs nothing at a switch: the kernel checks it at its scheduler tick
 * (2.08-2.12 s on the same ping-pong). The price: a thread can be sampled at
 * most once per tick (CONFIG_HZ: 250 Hz on Debian's kernels, 1000 Hz on
 * others), so each sample is weighted by the periods of its thread's CPU
 * time since its previous sample, which the timer counts itself (agent.c,
 * tick_weight: si_overrun), and the weights still add up to the threads'
 * CPU time.
 *
 * Every thread needs its own timer. The calling thread arms its own at start
 * (and in a fork child); the writer arms each new thread when its poll of
 * /proc/self/task first lists it (agent_threads.c: within ~10 ms of a
 * pthread_create; that thread's CPU time before goes into its first sample's
 * weight) and deletes a timer when its thread is gone: every timer holds a
 * queued-signal slot of the user's RLIMIT_SIGPENDING, which a program that
 * starts many short threads would otherwise exhaust.
 *
 * The signal is SIGTRAP with si_code SI_TIMER and the agent's cookie in
 * si_value: agent_handle_sample tells it from the workload's own SIGTRAPs as
 * it does the perf event's. Raw system calls: glibc before 2.34 keeps
 * timer_create in librt, which the agent does not link.
 *
 * Not signal context. A mutex guards the table: the writer, the start-up
 * thread and an exec wrapper may use it at once.
 */
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "sampler/agent/agent.h"

struct tick_timer {
    uint32_t tid;
    int timer_id; /* the kernel's; -1: seen while paused, created at resume */
};

static pthread_mutex_t tick_lock = PTHREAD_MUTEX_INITIALIZER;
static struct tick_timer *timers;
static size_t ntimers, cap;
/* Between a pause (exec, stop) and its resume no timer is created: one made
 * then could fire inside execve. A thread first seen meanwhile waits in the
 * table without one. */
static bool paused;

/* Arms timer_id every period_ns of its thread's CPU time (0: disarms).
 * from_thread_start: the first expiry at period_ns on the thread's clock
 * (TIMER_ABSTIME), not period_ns from now: a thread that has run longer
 * than that fires at once, and the periods it ran before count in the
 * signal's si_overrun, the sample's weight (agent.c, tick_weight). */
static int set_period(int timer_id, uint64_t period_ns, bool from_thread_start)
{
    struct itimerspec it;
    it.it_interval.tv_sec = (time_t)(period_ns / 1000000000ull);
    it.it_interval.tv_nsec = (long)(period_ns % 1000000000ull);
    it.it_value = it.it_interval;
    return (int)syscall(SYS_timer_settime, timer_id, from_thread_start && period_ns ? TIMER_ABSTIME : 0, &it, NULL);
}

/* A timer on thread tid's CPU clock that sends that thread SIGTRAP with the
 * cookie: its id, or -1 (the thread exited meanwhile, or no queued-signal
 * slot is left; its CPU time is then counted as unsampled). */
static int create_timer(uint32_t tid, uint64_t cookie, bool from_thread_start)
{
    struct sigevent ev;
    memset(&ev, 0, sizeof ev);
    ev.sigev_notify = SIGEV_THREAD_ID;
    ev.sigev_signo = SIGTRAP;
    ev.sigev_value.sival_ptr = (void *)(uintptr_t)cookie;
    ev._sigev_un._tid = (pid_t)tid;
    int timer_id;
    if (syscall(SYS_timer_create, agent_thread_cpu_clock(tid), &ev, &timer_id) != 0)
        return -1;
    if (set_period(timer_id, agent_config.period_ns, from_thread_start) != 0) {
        syscall(SYS_timer_delete, timer_id);
        return -1;
    }
    return timer_id;
}

static int find(uint32_t tid)
{
    for (size_t i = 0; i < ntimers; i++)
        if (timers[i].tid == tid)
            return (int)i;
    return -1;
}

int agent_tick_arm(uint32_t tid, uint64_t cookie, bool from_thread_start)
{
    pthread_mutex_lock(&tick_lock);
    int rc = 0;
    if (find(tid) >= 0)
        goto out;
    if (ntimers == cap) {
        size_t ncap = cap ? cap * 2 : 64;
        struct tick_timer *t = realloc(timers, ncap * sizeof *t);
        if (!t) {
            rc = -1;
            goto out;
        }
        timers = t, cap = ncap;
    }
    int timer_id = paused ? -1 : create_timer(tid, cookie, from_thread_start);
    if (timer_id < 0 && !paused) {
        rc = -1;
        goto out;
    }
    timers[ntimers++] = (struct tick_timer){tid, timer_id};
out:
    pthread_mutex_unlock(&tick_lock);
    return rc;
}

void agent_tick_forget(uint32_t tid)
{
    pthread_mutex_lock(&tick_lock);
    int i = find(tid);
    if (i >= 0) {
        if (timers[i].timer_id >= 0)
            syscall(SYS_timer_delete, timers[i].timer_id);
        timers[i] = timers[--ntimers];
    }
    pthread_mutex_unlock(&tick_lock);
}

/* Before exec (a tick inside execve would raise SIGTRAP in the new image,
 * before its agent handles it) and at stop: every timer disarmed; armed
 * again after a failed exec, with timers for the threads seen meanwhile. */
void agent_tick_pause_all(bool pause, uint64_t cookie)
{
    pthread_mutex_lock(&tick_lock);
    paused = pause;
    for (size_t i = 0; i < ntimers; i++) {
        if (timers[i].timer_id >= 0) /* resumed: the time paused is no sample's */
            set_period(timers[i].timer_id, pause ? 0 : agent_config.period_ns, false);
        else if (!pause) /* first seen while paused: its time since it began, as when not paused */
            timers[i].timer_id = create_timer(timers[i].tid, cookie, true);
    }
    pthread_mutex_unlock(&tick_lock);
}

/* POSIX timers are not inherited by fork: the child's table starts empty
 * (the parent's ids name nothing here). Only the forking thread runs. */
void agent_tick_atfork_child(void)
{
    pthread_mutex_init(&tick_lock, NULL);
    ntimers = 0;
    paused = false;
}
