/*
 * analyze/analyze.h — from a result directory to numbers: the folder's one
 * interface, and the only analyze/ header other folders include.
 *
 * profile_load() reads a result directory (only through the raw format of
 * format/format.h), symbolizes every distinct (pid, pc) once, and builds an
 * in-memory profile: frames, stacks (as frame ids), threads, processes and
 * samples (or, profile_load_as(PROFILE_LOAD_AGGREGATED), rows of samples
 * summed per thread and stack while reading). Everything after that (hotspot tables, callers/callees) is a pure
 * function of the profile, which is what the unit tests exercise.
 *
 * Why sub-headers: one 700-line header made every feature edit a shared file
 * (the ranks change touched four shared headers), and a reader looking for
 * one subsystem read all of them. Each subsystem's declarations now live in
 * its own header beside its .c files, and a change to one touches that one;
 * this file stays the single include for report/, cli/ and tests, so what
 * they see is unchanged.
 */
#ifndef OPPROF_ANALYZE_H
#define OPPROF_ANALYZE_H

#include "analyze/profile.h"   /* the profile model, loading, builders */
#include "analyze/hotspots.h"  /* self/total tables per key */
#include "analyze/metrics.h"   /* PMU derived metrics (pulls in format.h, pmu.h) */
#include "analyze/counters.h"  /* per-sample counters */
#include "analyze/operators.h" /* PyTorch operator attribution */
#include "analyze/phases.h"    /* phases and findings */
#include "analyze/threading.h" /* threads and OpenMP */
#include "analyze/ranks.h"     /* ranks of a parallel job */
#include "analyze/sweep.h"     /* sweeps and diffs */
#include "analyze/filter.h"    /* report --pid/--tid/--comm */
#include "analyze/memory.h"    /* memory over time */
#include "analyze/torch_shapes.h" /* FLOPs per operator (record --torch-shapes) */

#endif
