/*
 * sampler/common/perf_attr.h — the sigtrap fields of perf_event_attr (Linux
 * 5.13+: inherit_thread, remove_on_exec, sigtrap, sig_data) for every
 * sampler that opens opprof's sampling event, also where the installed
 * kernel headers predate them (Debian bullseye's linux-libc-dev 5.10). The
 * headers only name the fields; whether they work is the running kernel's
 * answer at perf_event_open, as everywhere else. Header-only, libc-only
 * (the agent includes it).
 */
#ifndef OPPROF_SAMPLER_PERF_ATTR_H
#define OPPROF_SAMPLER_PERF_ATTR_H

#include <linux/perf_event.h>
#include <stdint.h>
#include <string.h>

/* An attr with room for sig_data: with older headers, sig_data is the u64
 * right after their 120-byte struct (PERF_ATTR_SIZE_VER6), where 5.13 put
 * it (PERF_ATTR_SIZE_VER7 = 128). */
struct opr_perf_attr {
    struct perf_event_attr attr;
#ifndef HAVE_STRUCT_PERF_EVENT_ATTR_SIG_DATA
    uint64_t sig_data;
#endif
};

#ifndef HAVE_STRUCT_PERF_EVENT_ATTR_SIG_DATA
_Static_assert(sizeof(struct perf_event_attr) == 120,
               "kernel headers without sig_data but not PERF_ATTR_SIZE_VER6: the offsets below do not apply");
#endif

/* Zeroes *a and sets attr.size to all of it. */
static inline void opr_perf_attr_init(struct opr_perf_attr *a)
{
    memset(a, 0, sizeof *a);
    a->attr.size = sizeof *a;
}

/* inherit_thread + remove_on_exec + sigtrap (the kernel requires the first
 * two with the third), and sig_data, the word each SIGTRAP carries in
 * si_perf_data. */
static inline void opr_perf_attr_sigtrap(struct opr_perf_attr *a, uint64_t sig_data)
{
#ifdef HAVE_STRUCT_PERF_EVENT_ATTR_SIG_DATA
    a->attr.inherit_thread = 1;
    a->attr.remove_on_exec = 1;
    a->attr.sigtrap = 1;
    a->attr.sig_data = sig_data;
#else
    /* The flag bits are one u64 after read_format (offset 40), in the order
     * of the uapi header: ..., cgroup 32, text_poke 33, build_id 34,
     * inherit_thread 35, remove_on_exec 36, sigtrap 37. */
    uint64_t flags;
    unsigned char *raw = (unsigned char *)&a->attr;
    memcpy(&flags, raw + 40, sizeof flags);
    flags |= 1ull << 35 | 1ull << 36 | 1ull << 37;
    memcpy(raw + 40, &flags, sizeof flags);
    a->sig_data = sig_data;
#endif
}

#endif
