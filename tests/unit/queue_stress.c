/*
 * tests/unit/queue_stress.c — the agent's handler->writer queue under
 * contention, built with ThreadSanitizer (see Makefile.am): four producer
 * threads claim/fill/commit slots as the SIGTRAP handler does while one
 * consumer drains them as the writer thread does. Every committed sample
 * must be consumed exactly once with its contents intact, and claims that
 * find the queue full must be the only ones missing (they are "lost").
 *
 * A plain program (not CUnit) because it must link agent_queue.c itself and
 * run under -fsanitize=thread, which the rest of the suite does not use.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>

#include "sampler/agent/agent.h"

#define PRODUCERS 4
#define PER_PRODUCER 50000

/* agent_queue.c needs nothing else from the agent. */
static _Atomic uint64_t lost[PRODUCERS];
static _Atomic int producers_done;

static void *producer(void *arg)
{
    unsigned id = (unsigned)(uintptr_t)arg;
    for (uint32_t i = 0; i < PER_PRODUCER; i++) {
        /* Some work between samples, as a sampled thread has, so the
         * consumer keeps up most of the time and both paths are exercised. */
        for (volatile int spin = 0; spin < 2000; spin++)
            ;
        struct agent_slot *s = agent_queue_claim();
        if (!s) {
            atomic_fetch_add(&lost[id], 1);
            continue;
        }
        s->tid = id;
        s->time_ns = i;
        s->nframes = 3;
        s->pcs[0] = ((uint64_t)id << 32) | i;
        s->pcs[1] = ~s->pcs[0];
        s->pcs[2] = s->pcs[0] * 3;
        agent_queue_commit(s);
    }
    atomic_fetch_add(&producers_done, 1);
    return NULL;
}

/* One round: PRODUCERS threads against the consumer; 1 when it failed. */
static int run_round(int round)
{
    memset(lost, 0, sizeof lost);
    atomic_store(&producers_done, 0);
    pthread_t t[PRODUCERS];
    for (unsigned i = 0; i < PRODUCERS; i++)
        pthread_create(&t[i], NULL, producer, (void *)(uintptr_t)i);
    uint64_t consumed[PRODUCERS] = {0}, bad = 0;
    uint64_t last_seen[PRODUCERS];
    for (unsigned i = 0; i < PRODUCERS; i++)
        last_seen[i] = UINT64_MAX;
    for (;;) {
        /* As the writer does between drains; here while producers write
         * into the very pages it backs. */
        agent_queue_prefault();
        struct agent_slot *s = agent_queue_peek();
        if (!s) {
            if (atomic_load(&producers_done) == PRODUCERS && !agent_queue_peek())
                break;
            continue;
        }
        unsigned id = s->tid;
        uint64_t expect = ((uint64_t)id << 32) | s->time_ns;
        if (id >= PRODUCERS || s->nframes != 3 || s->pcs[0] != expect || s->pcs[1] != ~expect ||
            s->pcs[2] != expect * 3 || (last_seen[id] != UINT64_MAX && s->time_ns <= last_seen[id]))
            bad++;
        else {
            consumed[id]++;
            last_seen[id] = s->time_ns;
        }
        agent_queue_release();
    }
    for (unsigned i = 0; i < PRODUCERS; i++)
        pthread_join(t[i], NULL);
    int failed = bad != 0;
    uint64_t total_consumed = 0;
    for (unsigned i = 0; i < PRODUCERS; i++)
        total_consumed += consumed[i];
    if (total_consumed == 0)
        failed = 1; /* nothing went through: the test tested nothing */
    uint64_t total_lost = 0;
    for (unsigned i = 0; i < PRODUCERS; i++) {
        total_lost += lost[i];
        if (consumed[i] + lost[i] != PER_PRODUCER)
            failed = 1;
    }
    printf("queue_stress round %d: %d producers x %d samples: %llu consumed intact, %llu lost (queue full), "
           "%llu corrupt or out of order\n",
           round, PRODUCERS, PER_PRODUCER,
           (unsigned long long)(PRODUCERS * (uint64_t)PER_PRODUCER - total_lost),
           (unsigned long long)total_lost, (unsigned long long)bad);
    return failed;
}

int main(void)
{
    if (agent_queue_init(256) != 0) {
        fprintf(stderr, "queue_stress: cannot map the queue\n");
        return 2;
    }
    int failed = run_round(1);
    /* What a forked child does: entries left committed and claimed, then a
     * reset; none of them may come out, and the ring works as new. */
    for (int i = 0; i < 300; i++) {
        struct agent_slot *s = agent_queue_claim();
        if (s && i % 2 == 0)
            agent_queue_commit(s);
    }
    agent_queue_reset();
    if (agent_queue_peek() != NULL) {
        printf("queue_stress: an entry from before the reset came out after it\n");
        failed = 1;
    }
    failed |= run_round(2);
    printf("%d passed, %d failed\n", failed ? 0 : 1, failed ? 1 : 0);
    return failed;
}
