/*
 * sampler/record/launch_signals.c — what record does with the signals meant
 * to stop the workload (SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1/2).
 *
 * record outlives the workload so that it keeps what was collected; a signal
 * for the workload must reach it exactly once:
 *  - from the terminal (Ctrl-C: si_code SI_KERNEL) it already reached the
 *    workload, which is in the same process group: not passed on;
 *  - sent by a process with kill(): to record alone (kill PID, a job
 *    scheduler) it must be passed on; to the whole process group
 *    (kill -INT -PGID, timeout(1), scancel) the workload got it too, and
 *    passing it on would deliver it twice — a program that handles one SIGINT
 *    gracefully (Python's KeyboardInterrupt, a cleanup trap) would die of the
 *    second. siginfo cannot tell the two apart, so a sentinel process in the
 *    same process group tells: it receives what is sent to the group, never
 *    what is sent to record alone. record waits up to SENTINEL_WAIT_NS for
 *    its word before passing a signal on.
 * Handlers only note the signal; the decision runs in record's wait loop.
 * Those signals are blocked but while that loop sleeps (ppoll unblocks them
 * for the sleep alone): one that arrives just before the sleep begins still
 * ends it, so the loop can sleep until the workload ends instead of waking
 * to look (launch.c, wait_for_workload).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sampler/record/record_internal.h"

/* How long a signal kill() sent waits for the sentinel's word: it was woken
 * by the same kill() call, so it answers within a scheduling delay; 300 ms
 * covers a loaded machine (the only cost is that delay on a direct kill). */
#define SENTINEL_WAIT_NS 300000000ull

static const int forwarded_signals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
#define NSIGNALS (sizeof forwarded_signals / sizeof forwarded_signals[0])

static volatile sig_atomic_t interrupted_by; /* last such signal record received */
static volatile sig_atomic_t pending_sig;    /* sent by kill(): to be decided */
static volatile sig_atomic_t from_terminal;  /* the last one came from the kernel (tty) */
static pid_t workload, sentinel = -1;
static int sentinel_rd = -1, sentinel_wr = -1;
static uint64_t pending_since_ns;
static enum launch_signal_route route;
static sigset_t mask_before;   /* record's mask before start */
static sigset_t mask_sleeping; /* mask_before, the forwarded signals unblocked */
static bool masked;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void on_signal(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    interrupted_by = sig;
    from_terminal = si->si_code > 0;
    if (si->si_code <= 0) /* SI_USER, SI_QUEUE, SI_TKILL: a process sent it */
        pending_sig = sig;
}

/* The sentinel: one byte (the signal number) per signal it receives. */
static void on_sentinel_signal(int sig)
{
    unsigned char b = (unsigned char)sig;
    ssize_t w = write(sentinel_wr, &b, 1);
    (void)w;
}

/* handler (or SIG_DFL) for every signal record passes on */
static void set_simple_handlers(void (*handler)(int))
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    sa.sa_handler = handler;
    for (size_t i = 0; i < NSIGNALS; i++)
        sigaction(forwarded_signals[i], &sa, NULL);
}

static void start_sentinel(void)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0)
        return; /* no sentinel: signals sent by kill() are passed on, as before */
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        close(p[0]);
        close(p[1]);
        return;
    }
    if (pid == 0) {
        close(p[0]);
        sentinel_wr = p[1];
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(0);
        set_simple_handlers(on_sentinel_signal);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        for (;;)
            pause();
    }
    close(p[1]);
    fcntl(p[0], F_SETFL, O_NONBLOCK);
    sentinel = pid;
    sentinel_rd = p[0];
}

void launch_signals_start(pid_t child)
{
    workload = child;
    route = LAUNCH_SIGNAL_NONE;
    start_sentinel();
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    sa.sa_sigaction = on_signal;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigset_t forwarded;
    sigemptyset(&forwarded);
    for (size_t i = 0; i < NSIGNALS; i++) {
        sigaction(forwarded_signals[i], &sa, NULL);
        sigaddset(&forwarded, forwarded_signals[i]);
    }
    masked = sigprocmask(SIG_BLOCK, &forwarded, &mask_before) == 0;
    mask_sleeping = mask_before;
    for (size_t i = 0; i < NSIGNALS; i++)
        sigdelset(&mask_sleeping, forwarded_signals[i]);
}

void launch_signals_sleep(int pidfd, uint64_t max_ns)
{
    struct pollfd fds[2];
    nfds_t n = 0;
    if (pidfd >= 0)
        fds[n++] = (struct pollfd){.fd = pidfd, .events = POLLIN};
    if (pending_sig) {
        /* a signal kill() sent waits for the sentinel's word, or its time */
        if (sentinel_rd >= 0)
            fds[n++] = (struct pollfd){.fd = sentinel_rd, .events = POLLIN};
        uint64_t waited = now_ns() - pending_since_ns;
        uint64_t left = waited < SENTINEL_WAIT_NS ? SENTINEL_WAIT_NS - waited : 0;
        max_ns = left < max_ns ? left : max_ns;
    }
    struct timespec ts = {(time_t)(max_ns / 1000000000ull), (long)(max_ns % 1000000000ull)};
    ppoll(fds, n, max_ns == UINT64_MAX ? NULL : &ts, masked ? &mask_sleeping : NULL);
}

/* Whether the sentinel received sig (bytes for other signals are dropped). */
static bool sentinel_saw(int sig)
{
    unsigned char buf[64];
    ssize_t n;
    bool saw = false;
    while (sentinel_rd >= 0 && (n = read(sentinel_rd, buf, sizeof buf)) > 0)
        for (ssize_t i = 0; i < n; i++)
            saw |= buf[i] == (unsigned char)sig;
    return saw;
}

void launch_signals_poll(void)
{
    if (from_terminal && interrupted_by && route == LAUNCH_SIGNAL_NONE)
        route = LAUNCH_SIGNAL_TERMINAL;
    int sig = pending_sig;
    if (!sig)
        return;
    if (pending_since_ns == 0)
        pending_since_ns = now_ns();
    bool same_group = getpgid(workload) == getpgrp();
    if (same_group && sentinel >= 0 && sentinel_saw(sig)) {
        route = LAUNCH_SIGNAL_GROUP; /* the workload got it from the sender itself */
    } else if (!same_group || sentinel < 0 || now_ns() - pending_since_ns >= SENTINEL_WAIT_NS) {
        kill(workload, sig);
        route = LAUNCH_SIGNAL_FORWARDED;
    } else {
        return; /* wait for the sentinel's word */
    }
    pending_sig = 0;
    pending_since_ns = 0;
}

void launch_signals_stop(void)
{
    /* Unblocked while the handler still notes them: one that arrived after
     * the last sleep is not taken with its default action (which would end
     * record before it writes what it collected). */
    if (masked)
        sigprocmask(SIG_SETMASK, &mask_before, NULL);
    masked = false;
    set_simple_handlers(SIG_DFL);
    if (sentinel > 0) {
        kill(sentinel, SIGKILL);
        while (waitpid(sentinel, NULL, 0) < 0 && errno == EINTR)
            ;
    }
    if (sentinel_rd >= 0)
        close(sentinel_rd);
    sentinel = -1;
    sentinel_rd = -1;
}

int launch_signals_received(void)
{
    return interrupted_by;
}

enum launch_signal_route launch_signals_route(void)
{
    return route;
}
