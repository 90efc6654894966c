/*
 * sampler/agent/agent_signals.c — opprof's samples arrive as SIGTRAP; the workload
 * must keep its own SIGTRAP behaviour.
 *
 * SIGNAL-HANDLER CODE: on_sigtrap() runs in signal context. No malloc, no
 * locks, no stdio; errno is saved and restored.
 *
 * We install our handler once, then interpose sigaction() and signal() for
 * SIGTRAP only: the workload's handler is remembered and reported back to it as
 * if installed, and every SIGTRAP that is not one of our samples (int3,
 * raise(SIGTRAP), a debugger's) is passed on to it, or to the default action.
 */
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <string.h>

#include "sampler/agent/agent.h"

typedef int (*sigaction_fn)(int, const struct sigaction *, struct sigaction *);

static sigaction_fn real_sigaction;
static struct sigaction workload_action; /* what the workload believes is installed */
static bool installed;

static void pass_to_workload(int sig, siginfo_t *si, void *uc)
{
    struct sigaction act = workload_action;
    if (act.sa_flags & SA_SIGINFO) {
        if (act.sa_sigaction)
            act.sa_sigaction(sig, si, uc);
        return;
    }
    if (act.sa_handler == SIG_IGN)
        return;
    if (act.sa_handler == SIG_DFL) {
        /* Default action (core dump): restore it and re-deliver. */
        struct sigaction dfl;
        memset(&dfl, 0, sizeof dfl);
        dfl.sa_handler = SIG_DFL;
        real_sigaction(SIGTRAP, &dfl, NULL);
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, SIGTRAP);
        sigprocmask(SIG_UNBLOCK, &set, NULL);
        raise(SIGTRAP);
        return;
    }
    act.sa_handler(sig);
}

static void on_sigtrap(int sig, siginfo_t *si, void *uc)
{
    int saved_errno = errno;
    if (!agent_handle_sample(si, uc))
        pass_to_workload(sig, si, uc);
    errno = saved_errno;
}

int agent_signals_install(void)
{
    real_sigaction = (sigaction_fn)dlsym(RTLD_NEXT, "sigaction");
    if (real_sigaction == NULL)
        return -1;
    struct sigaction act;
    memset(&act, 0, sizeof act);
    act.sa_sigaction = on_sigtrap;
    act.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&act.sa_mask);
    if (real_sigaction(SIGTRAP, &act, &workload_action) != 0)
        return -1;
    installed = true;
    return 0;
}

__attribute__((visibility("default"))) int sigaction(int sig, const struct sigaction *act,
                                                     struct sigaction *old)
{
    if (real_sigaction == NULL)
        real_sigaction = (sigaction_fn)dlsym(RTLD_NEXT, "sigaction");
    if (sig != SIGTRAP || !installed)
        return real_sigaction(sig, act, old);
    if (old)
        *old = workload_action;
    if (act)
        workload_action = *act;
    return 0;
}

__attribute__((visibility("default"))) sighandler_t signal(int sig, sighandler_t handler)
{
    struct sigaction act, old;
    memset(&act, 0, sizeof act);
    act.sa_handler = handler;
    act.sa_flags = SA_RESTART;
    sigemptyset(&act.sa_mask);
    if (sigaction(sig, &act, &old) != 0)
        return SIG_ERR;
    /* sa_handler and sa_sigaction share storage (a union in glibc's struct
     * sigaction), so sa_handler gives the previous handler's address either
     * way, as the kernel's own signal() emulation returns it. */
    return old.sa_handler;
}
