/*
 * sampler/attach/attach.h — `opprof record -p PID`: attach mode, sampled from
 * outside with perf_event, writing the same raw streams as the agent.
 */
#ifndef OPPROF_ATTACH_H
#define OPPROF_ATTACH_H

#include "sampler/record/record.h"

/* Samples the running process opts->attach_pid (its threads, and children it
 * forks meanwhile) from outside with perf_event, writing the same raw streams
 * as the agent; the target is never stopped or signalled. Stops after
 * duration_s, on SIGINT/SIGTERM/SIGHUP, or when the target exits. Returns 0
 * when the recording worked, 2 (one line on stderr) when it could not start. */

#endif
