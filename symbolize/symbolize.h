/*
 * symbolize/symbolize.h — addresses to frames.
 *
 * The symbolizer is given each process's executable mappings (as the agent
 * recorded them) and then answers "what is at this address in this process":
 * function (demangled), module, offset in the module, source file:line where
 * debug info exists. ELF work is done once per module file and cached by
 * build-id (falling back to path + size + mtime when there is no build-id), so
 * the same libtorch_cpu.so in eight processes is read once.
 *
 * Rules it keeps:
 *  - A PC beyond a symbol's st_size is never given that symbol's name; it is
 *    reported as unknown with module + offset ("libfoo.so+0x1234"), and with
 *    the start of its function when the module's .eh_frame has an FDE for it.
 *  - .symtab is preferred; .dynsym is used otherwise; a separate debug file is
 *    found through build-id (/usr/lib/debug/.build-id/xx/yyyy.debug) or
 *    .gnu_debuglink, and its symbols and line tables are used when present.
 *  - When the file on disk has a different build-id than the one recorded, its
 *    symbols are not trusted: the frame is unknown and the module is counted in
 *    the stats as mismatched.
 *  - Return addresses are looked up at pc-1 (the call instruction), the leaf PC
 *    at pc itself.
 *  - "[vdso]" is read from the image the agent saved as "vdso.so" in the result
 *    directory.
 */
#ifndef OPPROF_SYMBOLIZE_H
#define OPPROF_SYMBOLIZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct symbolizer;

struct sym_frame {
    const char *function;    /* demangled name; NULL when unknown */
    const char *module;      /* basename of the module ("libc.so.6"), NULL if no mapping */
    const char *module_path; /* full path as recorded, NULL if no mapping */
    uint64_t module_offset;  /* address relative to the module's ELF base (what addr2line takes) */
    uint64_t symbol_offset;  /* pc - symbol start, when function != NULL */
    /* Module offset (same space as module_offset) where the enclosing
     * function starts: the symbol's address when function != NULL; otherwise,
     * when no symbol covers the PC (stripped static functions), the start of
     * the .eh_frame FDE that covers it, with function still NULL. 0 when
     * unknown. All PCs of one unknown function share it, so callers can
     * name the frame "<module>+0x<function_start>" instead of by PC. */
    uint64_t function_start;
    bool function_start_from_cfi; /* function_start came from .eh_frame, not a symbol */
    const char *source_file; /* NULL when no line info */
    int line;                /* 0 when no line info */
};

struct symbolizer_stats {
    unsigned modules;                /* distinct module files seen */
    unsigned modules_without_symbols;/* no .symtab, no .dynsym, no debug file */
    unsigned modules_missing;        /* file not found on this machine */
    unsigned modules_mismatched;     /* build-id differs from the recorded one */
    /* Root reading a result another user owns reads only the files that user
     * may read: modules_unreadable files were not opened on their behalf. */
    unsigned modules_unreadable;
    bool reads_as_owner;             /* that rule applies to this result */
    uint32_t owner_uid;              /* the result directory's owner, when it does */
    unsigned perf_maps;              /* perf maps read (one per process that had one) */
    uint64_t perf_map_names;         /* lookups named from a perf map */
    uint64_t lookups;                /* symbolizer_lookup calls */
    uint64_t unknown;                /* lookups that found no function */
};

/* result_dir is where "vdso.so" may be found; may be NULL. Returns NULL only
 * when out of memory. */
struct symbolizer *symbolizer_new(const char *result_dir);
void symbolizer_free(struct symbolizer *sym);

/* Declares an executable mapping of process pid. build_id may be NULL. */
int symbolizer_add_mapping(struct symbolizer *sym, uint32_t pid, uint64_t start,
                           uint64_t end, uint64_t pgoff, const char *path,
                           const uint8_t *build_id, size_t build_id_len);

/* Says that address space asid (what add_mapping and lookup call pid) is
 * the OS process os_pid. Code at addresses no file-backed mapping covers
 * (JITs, CPython 3.12+'s `-X perf` trampolines) is then named from that
 * process's perf map: "perf-PID.map" in the result dir when one was put
 * there, else /tmp/perf-PID.map (read once, at the first such lookup). The
 * frame's module is then "[perf map]". Returns -1 only when out of memory. */
int symbolizer_set_os_pid(struct symbolizer *sym, uint32_t asid, uint32_t os_pid);

/* Resolves pc in process pid. is_return_address: pc is a return address (all
 * frames but the leaf), so the call site pc-1 is looked up. Strings in *out
 * stay valid until symbolizer_free. Always fills *out (unknown fields NULL/0).
 * Returns 0 when a function was found, -1 otherwise. */
int symbolizer_lookup(struct symbolizer *sym, uint32_t pid, uint64_t pc,
                      bool is_return_address, struct sym_frame *out);

/* Modules lacking symbols, for the report's "unknown frames" note. Calls fn
 * once per module path with the problem ("no symbols", "missing", "build-id mismatch",
 * "not read: the result's owner may not read it"). */
void symbolizer_for_each_problem(struct symbolizer *sym,
                                 void (*fn)(const char *path, const char *problem, void *arg),
                                 void *arg);

/* Module files are opened lazily, at the first lookup landing in one of their
 * mappings, so modules/problems describe the modules lookups touched (a
 * mapped but never-sampled library is neither counted nor reported). */
void symbolizer_get_stats(const struct symbolizer *sym, struct symbolizer_stats *out);

/* __cxa_demangle wrapper: returns a malloc'd demangled name, or NULL when name
 * is not a mangled C++ name. */
char *symbolize_demangle(const char *name);

#endif
