/*
 * bench/switch_pingpong.c — two threads hand a byte back and forth through
 * two pipes, with a little work between: ~2 context switches per round and
 * little else. The perf_event timer's cost grows with context switches (its
 * hrtimer is started and cancelled at each one), --timer tick's does not:
 * bench/run.sh's "switch" rows. Built by bench/run.sh (not installed).
 * Usage: switch_pingpong ROUNDS
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static int to_peer[2], to_main[2];
static long rounds;

static void work(void)
{
    volatile long s = 0;
    for (int k = 0; k < 2000; k++)
        s += k;
}

static void *peer(void *arg)
{
    char c;
    for (long i = 0; i < rounds; i++) {
        if (read(to_peer[0], &c, 1) != 1)
            break;
        work();
        if (write(to_main[1], &c, 1) != 1)
            break;
    }
    return arg;
}

int main(int argc, char **argv)
{
    rounds = argc > 1 ? atol(argv[1]) : 100000;
    pthread_t t;
    if (pipe(to_peer) != 0 || pipe(to_main) != 0 || pthread_create(&t, NULL, peer, NULL) != 0) {
        perror("switch_pingpong");
        return 1;
    }
    char c = 'x';
    for (long i = 0; i < rounds; i++) {
        work();
        if (write(to_peer[1], &c, 1) != 1 || read(to_main[0], &c, 1) != 1) {
            perror("switch_pingpong");
            return 1;
        }
    }
    pthread_join(t, NULL);
    return 0;
}
