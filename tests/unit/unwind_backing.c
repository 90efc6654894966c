/*
 * tests/unit/unwind_backing.c — part of the unwind_cfi program: the pages
 * the agent backs before a handler touches them (MADV_POPULATE_WRITE), so
 * that the handler takes no first-touch page faults there (~2-15 us each
 * on a VM): a thread's walk memo (the writer's agent_unwind_prefault) and
 * the first deferred walk's copy buffer (unwind_defer_prefault, at
 * start-up). Each check measures the faults of the handler's code path
 * with and without the prefault (RUSAGE_THREAD minor faults).
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sampler/agent/unwind_table.h"
#include "tests/unit/check.h"

int check_defer_backing(const uint64_t *stack);
int check_memo_backing(void);

/* agent_unwind_prefault backs memos before threads touch them; the control: a slot claimed first */
static void *claim_and_touch(void *faults)
{
    struct unwind_memo_slot *ms = unwind_memo_for((int32_t)syscall(SYS_gettid));
    struct rusage before, after;
    getrusage(RUSAGE_THREAD, &before);
    volatile uint8_t *b = ms ? (volatile uint8_t *)ms->rules : NULL;
    for (size_t off = 0; b && off < sizeof ms->rules + sizeof ms->leaves; off += 4096)
        b[off] = b[off];
    getrusage(RUSAGE_THREAD, &after);
    *(long *)faults = ms ? after.ru_minflt - before.ru_minflt : -1;
    return NULL;
}

int check_memo_backing(void)
{
    static uint8_t probe[4096] __attribute__((aligned(4096)));
    bool can = madvise(probe, 4096, MADV_POPULATE_WRITE) == 0;
    long control = 0, backed = 0;
    pthread_t th;
    CHECK(pthread_create(&th, NULL, claim_and_touch, &control) == 0 && pthread_join(th, NULL) == 0, "memo: thread");
    agent_unwind_prefault();
    CHECK(pthread_create(&th, NULL, claim_and_touch, &backed) == 0 && pthread_join(th, NULL) == 0, "memo: thread");
    printf("unwind_cfi: a memo's caches: %ld page faults claimed first, %ld backed first%s\n", control, backed,
           can ? "" : " (not judged: no MADV_POPULATE_WRITE, Linux < 5.14)");
#if !defined(__SANITIZE_ADDRESS__) /* its shadow memory faults too */
    CHECK(!can || (control >= 8 && backed == 0), "memo: the writer did not back the slot the next thread claimed");
#endif
    return failures;
}

/* unwind_defer_prefault backs the pages a process's first deferred walk
 * touches, so that the handler's copy takes no first-touch faults on them.
 * Each case in a fork child whose pool pages are as untouched as a new
 * process's (run before anything here touches them); the control keeps a
 * walk without the prefault. Both children also fault in the code they run
 * (fork leaves a file-backed text page to be faulted in again: 3 here), so
 * the check is the difference: the pool's pages, at least 3 (the pool's
 * states, read then written, the buffer's struct, its bytes, the counter
 * of vanished modules' page). Exit status: the keep's faults (255: failed). */
static int defer_keep_faults(const uint64_t *stack, bool prefault)
{
    pid_t pid = fork();
    if (pid == 0) {
        /* What the agent's handler finds written already, and a fork
         * child finds shared copy-on-write: the stack, the counters, the
         * calls' PLT slots. Only the pool's own pages are left. */
        volatile uint8_t deep[32768];
        memset((void *)deep, 1, sizeof deep);
        atomic_fetch_add(&unwind_counts.deferred_samples, 0);
        atomic_fetch_add(&unwind_counts.deferred_unknown_stack, 0);
        atomic_fetch_add(&unwind_counts.deferred_pool_full, 0);
        struct unwind_resume rs = {.sp = (uint64_t)(uintptr_t)stack, .nframes = 1};
        struct unwind_resume warm;
        memcpy(&warm, &rs, sizeof warm);
        struct rusage before, after;
        getrusage(RUSAGE_THREAD, &before);
        getrusage(RUSAGE_THREAD, &after);
        if (prefault)
            unwind_defer_prefault();
        getrusage(RUSAGE_THREAD, &before);
        uint32_t id = unwind_defer_keep(&rs, UNWIND_DEFER_PLAIN);
        getrusage(RUSAGE_THREAD, &after);
        long n = after.ru_minflt - before.ru_minflt;
        _exit(id == 0 ? 255 : n > 254 ? 254 : (int)n);
    }
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
        return 255;
    return WEXITSTATUS(st);
}

int check_defer_backing(const uint64_t *stack)
{
    static uint8_t probe[4096] __attribute__((aligned(4096)));
    bool can = madvise(probe, 4096, MADV_POPULATE_WRITE) == 0;
    int control = defer_keep_faults(stack, false), backed = defer_keep_faults(stack, true);
    printf("unwind_cfi: the first deferred walk's copy: %d page faults without the prefault, %d with it%s\n", control,
           backed, can ? "" : " (not judged: no MADV_POPULATE_WRITE, Linux < 5.14)");
    CHECK(control != 255 && backed != 255, "defer backing: a keep failed");
#if !defined(__SANITIZE_ADDRESS__) /* its shadow memory faults too */
    CHECK(!can || control - backed >= 3, "defer backing: the prefault left faults on the pool to the handler's copy");
#endif
    return failures;
}
