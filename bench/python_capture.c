/*
 * bench/python_capture.c — the handler's Python capture (agent_python.c:
 * agent_python_capture, the walk of python_walk.c with the thread's memos
 * and the reads checked against agent_memmap.c's table), built into a
 * small library that bench/python_capture.py loads with ctypes into a
 * running interpreter and calls from Python code at chosen depths.
 *
 * Why not under the agent: valgrind cannot run the agent's timer signals
 * reliably (a synchronous SIGTRAP is fatal to it; the tick timer's
 * asynchronous one hangs or trips its syscall assertion beside a busy
 * machine), and a sample's place is the timer's choice. Here the capture
 * runs at calls the driver makes, the same in every run, so callgrind's
 * instruction count per capture is a figure that load does not move.
 *
 * What differs from the handler: the capture runs in a normal call, not a
 * signal handler (the code is the same; only the caller differs), and the
 * innermost Python frame is always at a call (a ctypes call), as it is
 * when a thread is sampled inside a native operator. The writer's part
 * (learning new mappings after a miss) is bench_drain(), called by the
 * driver between captures as the writer's drains would run.
 *
 * Stand-ins for the agent's other files: a clock that moves 10 ms at each
 * drain (so a miss is looked at), no library unloads, no writer to wake,
 * and agent_tstate_remember/_prefault do nothing (the ranks of the off-CPU poll).
 */
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sampler/agent/agent.h"

#define BENCH_API __attribute__((visibility("default")))

/* What bench/python_capture.py calls (ctypes finds them by name). */
BENCH_API int bench_setup(void);
BENCH_API void bench_drain(void);
BENCH_API unsigned bench_capture(void);
BENCH_API uint64_t bench_frame_code(unsigned i);
BENCH_API int32_t bench_frame_instr(unsigned i);

struct agent_writer_counts agent_writer_counts;
static uint64_t fake_now_ns = 1000000000ull;
uint64_t agent_now_ns(void)
{
    return fake_now_ns;
}
unsigned long long agent_phdr_unload_count(void)
{
    return 0;
}
void agent_wake_writer(void)
{
}
void agent_tstate_remember(uint32_t tid, uint64_t tstate)
{
    (void)tid;
    (void)tstate;
}
void agent_tstate_prefault(void)
{
}

static uint32_t own_tid;
static struct py_frame_ref frames[OPR_MAX_PYFRAMES];

/* Finds the interpreter and reads the memory map: 1 when capture is on. */
BENCH_API int bench_setup(void)
{
    own_tid = (uint32_t)syscall(SYS_gettid);
    agent_memmap_refresh();
    return agent_python_probe();
}

/* The writer's drain: misses since the last one are looked up. */
BENCH_API void bench_drain(void)
{
    fake_now_ns += 10000000ull;
    agent_memmap_maybe_refresh();
}

/* One capture of the calling thread's Python stack, as the handler takes
 * it; the frame count. */
BENCH_API unsigned bench_capture(void)
{
    return agent_python_capture(frames, OPR_MAX_PYFRAMES, own_tid);
}

/* The last capture's frame i, innermost first: its code object's address
 * and its instruction (code units), for the driver's check against
 * Python's own view of the stack. */
BENCH_API uint64_t bench_frame_code(unsigned i)
{
    return i < OPR_MAX_PYFRAMES ? frames[i].code : 0;
}
BENCH_API int32_t bench_frame_instr(unsigned i)
{
    return i < OPR_MAX_PYFRAMES ? frames[i].instr : -2;
}
