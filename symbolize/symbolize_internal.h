/*
 * symbolize/symbolize_internal.h — private interface between the symbolizer
 * front end (symbolizer.c: processes, mappings, caches, stats) and the ELF
 * reader (elf_symbols.c: build-ids, PT_LOADs, symbol tables, debug files,
 * line tables; eh_frame.c: function ranges from .eh_frame_hdr/.eh_frame).
 * Not installed, not used outside symbolize/.
 */
#ifndef OPPROF_SYMBOLIZE_INTERNAL_H
#define OPPROF_SYMBOLIZE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* NT_GNU_BUILD_ID is normally 20 bytes (sha1); some linkers write md5 (16) or
 * a uuid, a few use longer hashes. 64 covers every producer seen in practice. */
#define SYM_BUILD_ID_MAX 64

/* Who a file on disk is: used both to detect a build-id mismatch and as the
 * module cache key when the file has no build-id. */
struct elf_ident {
    uint8_t build_id[SYM_BUILD_ID_MAX];
    size_t build_id_len; /* 0: no NT_GNU_BUILD_ID (or not an ELF file) */
    uint64_t size;
    int64_t mtime_sec;
    long mtime_nsec;
    dev_t dev;
    ino_t ino;
};

/* One function symbol of a module, after merging and deduplication. */
struct elf_symbol {
    uint64_t addr;     /* ELF virtual address (link-time) */
    uint64_t size;     /* st_size; 0 means "matches its exact address only" */
    uint32_t name_off; /* offset into the module's name arena */
    uint32_t pad;
};

/* A loaded module file. Opaque to symbolizer.c. */
struct elf_module;

/* Fills *id for path. Returns 0 when the file exists and can be opened (even
 * if it is not a valid ELF file: build_id_len is then 0), -1 when it cannot be
 * opened (missing, permission). Never crashes on garbage. */
int elf_read_ident(const char *path, struct elf_ident *id);

/* Reads program headers, symbols (.symtab or .dynsym, plus the separate debug
 * file's .symtab) and notes whether line info exists. Returns NULL only when
 * out of memory; an unreadable/corrupt file gives a module with no symbols. */
struct elf_module *elf_module_load(const char *path, const struct elf_ident *id);
void elf_module_free(struct elf_module *m);

/* Address translation: file offset of the PC -> ELF vaddr through the
 * PT_LOAD that contains that offset. Returns false when the module has no
 * usable program headers (caller then falls back to the file offset). */
bool elf_module_translate(const struct elf_module *m, uint64_t file_offset, uint64_t *vaddr);

size_t elf_module_symbol_count(const struct elf_module *m);

/* Index of the function containing vaddr, or -1. Honors st_size strictly. */
long elf_module_find_symbol(const struct elf_module *m, uint64_t vaddr);
const struct elf_symbol *elf_module_symbol(const struct elf_module *m, size_t idx);

/* Display name of symbol idx: demangled on first use and kept with the module,
 * so each name is demangled once. Valid until elf_module_free. */
const char *elf_module_symbol_name(struct elf_module *m, size_t idx);

/* Source file and line for vaddr from the module's (or its debug file's)
 * DWARF. Returns 0 on success; *file stays valid until elf_module_free. The
 * Dwarf handle is opened on first use and kept. */
int elf_module_source_line(struct elf_module *m, uint64_t vaddr, const char **file, int *line);

/* Start (ELF vaddr) of the function containing vaddr according to the
 * module's unwind tables (.eh_frame_hdr + .eh_frame FDEs), for PCs no symbol
 * covers. The file is mapped on first use and kept. Returns false when no FDE
 * covers vaddr or the module has no usable .eh_frame_hdr table. */
bool elf_module_cfi_function(struct elf_module *m, uint64_t vaddr, uint64_t *start);

/* Whether a separate debug file was found and used (for tests/diagnostics). */
const char *elf_module_debug_file(const struct elf_module *m);

/* Root of the system debug tree ("/usr/lib/debug"); tests point it at a
 * temporary directory to exercise the build-id lookup. NULL restores it. */
void elf_set_debug_root(const char *dir);

/* elf_symbols.c: a binary search in n entries of size bytes sorted by the
 * uint64_t at key_off (offsetof) in each: the index of the last one whose
 * key is <= x; n when there is none (n 0, or x below the first key). */
size_t sym_last_at_or_below(const void *entries, size_t n, size_t size, size_t key_off, uint64_t x);

/* CRC32 as used by .gnu_debuglink (zlib polynomial); exposed for tests. */
uint32_t sym_crc32(uint32_t crc, const void *buf, size_t len);

/* eh_frame.c: one module file's FDE lookup table. eh_frame_open returns NULL
 * when the file has no PT_GNU_EH_FRAME, or its table is missing, of an
 * encoding we do not binary-search, or corrupt. eh_frame_find gives the
 * [start, end) ELF vaddrs of the FDE covering vaddr. */
struct eh_frame;
struct eh_frame *eh_frame_open(const char *path);
bool eh_frame_find(const struct eh_frame *ef, uint64_t vaddr, uint64_t *start, uint64_t *end);
void eh_frame_free(struct eh_frame *ef);

/* perf_map.c: a process's perf map (/tmp/perf-PID.map), the names JITs and
 * CPython's -X perf trampolines give their anonymous code. */
struct perf_map;

/* Reads the perf map at path (regular files only, size-limited, malformed
 * lines skipped). NULL when it cannot be opened or out of memory. */
struct perf_map *perf_map_load(const char *path);
void perf_map_free(struct perf_map *m);
size_t perf_map_size(const struct perf_map *m);

/* The name of the entry covering addr (and its start in *start), or NULL.
 * The name lives until perf_map_free. */
const char *perf_map_find(const struct perf_map *m, uint64_t addr, uint64_t *start);

/* file_access.c: files named by a result are opened here, and only when the
 * result's owner may read them (see the file's comment for the rule). */
struct stat;
struct file_reader {
    bool as_owner;   /* root reading another user's result: the rule applies */
    uid_t uid;       /* the result directory's owner */
    gid_t gid;       /* their primary group (65534 when they have no passwd entry) */
    gid_t *groups;   /* their groups (getgrouplist) */
    int ngroups;
};

/* Decides the rule for result_dir (NULL: none). Never fails: out of memory
 * only drops groups, which refuses more, never less. */
void file_reader_init(struct file_reader *r, const char *result_dir);
void file_reader_free(struct file_reader *r);
/* Makes r's rule apply to the opens that follow (NULL: no rule). */
void file_reader_use(const struct file_reader *r);
/* Opens between enter and leave (nested pairs allowed) run with the owner's
 * filesystem uid/gid; for readers outside this file (libdw, perf maps). */
void file_access_enter(void);
void file_access_leave(void);
/* Opens path read-only, non-blocking; regular files only. -1 with errno
 * EACCES when the rule refuses it (or the kernel does). */
int sym_open_regular(const char *path, struct stat *st);

#endif
