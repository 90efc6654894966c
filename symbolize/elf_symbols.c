/*
 * symbolize/elf_symbols.c — everything the symbolizer learns from an ELF file.
 *
 * Per module file, once: the NT_GNU_BUILD_ID, the PT_LOAD segments (for
 * mapping file offsets to ELF vaddrs), one sorted array of function symbols
 * merged from .symtab (else .dynsym) and from a separate debug file, and where
 * DWARF line info lives. A lookup is then a binary search; names are demangled
 * the first time they are shown. Line tables are read with libdw only for
 * modules that have .debug_info/.debug_line, on first use.
 *
 * Every reader here must survive garbage (truncated files, no section headers,
 * bogus sh_link): libelf bounds-checks section data against the file size, and
 * we check every returned pointer; a bad file just yields no symbols.
 */
#include <elfutils/libdw.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "symbolize/symbolize.h"
#include "symbolize/symbolize_internal.h"

struct load_seg {
    uint64_t offset, vaddr, filesz, memsz;
    uint32_t flags;
};

struct elf_module {
    char *path;
    struct load_seg *segs;
    size_t nsegs;

    struct elf_symbol *syms; /* sorted by addr, one entry per address */
    uint64_t *max_end;       /* max_end[i] = max end of syms[0..i]: bounds the walk-back over nested symbols */
    size_t nsyms, cap;
    char *names;             /* arena of NUL-terminated mangled names */
    size_t names_len, names_cap;
    char **display;          /* lazily demangled names (NULL = not yet) */

    char *debug_file;        /* separate debug file used, or NULL */
    char *dwarf_path;        /* file holding .debug_info/.debug_line, or NULL */
    bool dwarf_tried;
    int dwarf_fd;
    Elf *dwarf_elf;
    Dwarf *dwarf;
    bool use_aranges;        /* .debug_aranges present: dwarf_addrdie answers */
    struct cu_range *cu_ranges; /* otherwise our own sorted CU address table */
    size_t ncu_ranges;

    bool cfi_tried;          /* eh_frame_open attempted (first unknown PC) */
    struct eh_frame *cfi;    /* FDE table of path, or NULL */
};

struct cu_range {
    uint64_t lo, hi;   /* [lo, hi) */
    Dwarf_Off die_off; /* offset of the CU DIE */
};

static char debug_root[PATH_MAX] = "/usr/lib/debug";

void elf_set_debug_root(const char *dir)
{
    snprintf(debug_root, sizeof debug_root, "%s", dir ? dir : "/usr/lib/debug");
}

/* ------------------------------------------------------------------------- */
/* Small helpers                                                              */
/* ------------------------------------------------------------------------- */

uint32_t sym_crc32(uint32_t crc, const void *buf, size_t len)
{
    static uint32_t table[256];
    static bool ready;
    if (!ready) { /* idempotent, so a race only recomputes the same table */
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int k = 0; k < 8; k++)
                c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
            table[i] = c;
        }
        ready = true;
    }
    const unsigned char *p = buf;
    crc = ~crc;
    for (size_t i = 0; i < len; i++)
        crc = table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
    return ~crc;
}

/* Every file is opened through sym_open_regular (file_access.c): regular
 * files only, and only those the result's owner may read. */
static int open_regular(const char *path, struct stat *st)
{
    return sym_open_regular(path, st);
}

static bool file_crc32(const char *path, uint32_t *out)
{
    int fd = open_regular(path, NULL);
    if (fd < 0)
        return false;
    unsigned char buf[16384];
    uint32_t crc = 0;
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0)
        crc = sym_crc32(crc, buf, (size_t)n);
    close(fd);
    if (n < 0)
        return false;
    *out = crc;
    return true;
}

static Elf *open_elf(const char *path, int *fd_out, struct stat *st)
{
    static bool version_set;
    if (!version_set) {
        elf_version(EV_CURRENT);
        version_set = true;
    }
    int fd = open_regular(path, st);
    if (fd < 0)
        return NULL;
    /* mmap: .dynsym/.dynstr of a 120 MB library are then read in place. */
    Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
    if (!elf || elf_kind(elf) != ELF_K_ELF) {
        if (elf)
            elf_end(elf);
        close(fd);
        return NULL;
    }
    *fd_out = fd;
    return elf;
}

static void close_elf(Elf *elf, int fd)
{
    if (elf)
        elf_end(elf);
    if (fd >= 0)
        close(fd);
}

/* Scans one note area for NT_GNU_BUILD_ID. */
static size_t build_id_in_notes(Elf_Data *data, uint8_t *out, size_t cap)
{
    if (!data || !data->d_buf)
        return 0;
    size_t off = 0, next;
    GElf_Nhdr nh;
    size_t name_off, desc_off;
    while (off < data->d_size &&
           (next = gelf_getnote(data, off, &nh, &name_off, &desc_off)) > 0) {
        if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
            memcmp((const char *)data->d_buf + name_off, "GNU", 4) == 0 &&
            nh.n_descsz > 0 && nh.n_descsz <= cap) {
            memcpy(out, (const char *)data->d_buf + desc_off, nh.n_descsz);
            return nh.n_descsz;
        }
        off = next;
    }
    return 0;
}

static size_t read_build_id(Elf *elf, uint8_t *out, size_t cap)
{
    size_t phnum = 0;
    if (elf_getphdrnum(elf, &phnum) == 0) {
        for (size_t i = 0; i < phnum; i++) {
            GElf_Phdr ph;
            if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_NOTE)
                continue;
            Elf_Data *d = elf_getdata_rawchunk(elf, (int64_t)ph.p_offset, ph.p_filesz,
                                               ph.p_align == 8 ? ELF_T_NHDR8 : ELF_T_NHDR);
            size_t n = build_id_in_notes(d, out, cap);
            if (n)
                return n;
        }
    }
    /* Separate debug files have NOBITS segments; their notes are sections. */
    Elf_Scn *scn = NULL;
    while ((scn = elf_nextscn(elf, scn)) != NULL) {
        GElf_Shdr sh;
        if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE)
            continue;
        size_t n = build_id_in_notes(elf_getdata(scn, NULL), out, cap);
        if (n)
            return n;
    }
    return 0;
}

int elf_read_ident(const char *path, struct elf_ident *id)
{
    memset(id, 0, sizeof *id);
    struct stat st;
    int fd = open_regular(path, &st);
    if (fd < 0)
        return -1;
    close(fd);
    id->size = (uint64_t)st.st_size;
    id->mtime_sec = st.st_mtim.tv_sec;
    id->mtime_nsec = st.st_mtim.tv_nsec;
    id->dev = st.st_dev;
    id->ino = st.st_ino;
    int efd = -1;
    Elf *elf = open_elf(path, &efd, NULL);
    if (elf) {
        id->build_id_len = read_build_id(elf, id->build_id, sizeof id->build_id);
        close_elf(elf, efd);
    }
    return 0;
}

/* ------------------------------------------------------------------------- */
/* Symbol collection                                                          */
/* ------------------------------------------------------------------------- */

/* Preference among symbols at the same address, stored in elf_symbol.pad:
 * a sized symbol beats a size-0 one (it can match more than one address), an
 * exported name beats a local one, "malloc" beats "__libc_malloc". */
static uint32_t symbol_rank(const GElf_Sym *s, const char *name)
{
    unsigned bind = GELF_ST_BIND(s->st_info);
    uint32_t r = 0;
    if (s->st_size > 0)
        r |= 16;
    if (bind == STB_GLOBAL || bind == STB_WEAK || bind == STB_GNU_UNIQUE)
        r |= 8;
    unsigned underscores = 0;
    while (name[underscores] == '_' && underscores < 3)
        underscores++;
    r |= (3 - underscores) << 1;
    if (bind == STB_GLOBAL)
        r |= 1;
    return r;
}

static bool push_name(struct elf_module *m, const char *name, uint32_t *off)
{
    size_t len = strlen(name) + 1;
    if (m->names_len + len > UINT32_MAX)
        return false;
    if (m->names_len + len > m->names_cap) {
        size_t cap = m->names_cap ? m->names_cap * 2 : 4096;
        while (cap < m->names_len + len)
            cap *= 2;
        char *p = realloc(m->names, cap);
        if (!p)
            return false;
        m->names = p;
        m->names_cap = cap;
    }
    memcpy(m->names + m->names_len, name, len);
    *off = (uint32_t)m->names_len;
    m->names_len += len;
    return true;
}

static void add_symbols_from(struct elf_module *m, Elf *elf, Elf_Scn *scn, const GElf_Shdr *sh)
{
    Elf_Data *data = elf_getdata(scn, NULL);
    if (!data || !data->d_buf || data->d_size == 0)
        return;
    size_t entsize = gelf_fsize(elf, ELF_T_SYM, 1, EV_CURRENT);
    if (entsize == 0)
        return;
    size_t n = data->d_size / entsize;
    if (m->nsyms + n > m->cap) {
        size_t cap = m->nsyms + n;
        struct elf_symbol *p = realloc(m->syms, cap * sizeof *p);
        if (!p)
            return;
        m->syms = p;
        m->cap = cap;
    }
    for (size_t i = 1; i < n; i++) { /* entry 0 is the reserved null symbol */
        GElf_Sym s;
        if (!gelf_getsym(data, (int)i, &s))
            continue;
        unsigned type = GELF_ST_TYPE(s.st_info);
        if ((type != STT_FUNC && type != STT_GNU_IFUNC) || s.st_shndx == SHN_UNDEF ||
            s.st_value == 0)
            continue;
        const char *name = elf_strptr(elf, sh->sh_link, s.st_name);
        if (!name || !*name)
            continue;
        struct elf_symbol *e = &m->syms[m->nsyms];
        if (!push_name(m, name, &e->name_off))
            return;
        e->addr = s.st_value;
        /* Clamp so addr+size cannot wrap on a corrupt size. */
        e->size = s.st_size > UINT64_MAX - s.st_value ? UINT64_MAX - s.st_value : s.st_size;
        e->pad = symbol_rank(&s, name);
        m->nsyms++;
    }
}

/* Collects symbols of one file. want_dynsym: fall back to .dynsym when there is
 * no .symtab. Also reports whether DWARF line info and a debuglink exist. */
static void scan_file(struct elf_module *m, Elf *elf, bool want_dynsym, bool *has_dwarf,
                      char *debuglink, size_t debuglink_cap, uint32_t *debuglink_crc)
{
    size_t shstrndx;
    bool have_shstr = elf_getshdrstrndx(elf, &shstrndx) == 0;
    Elf_Scn *symtab = NULL, *dynsym = NULL;
    GElf_Shdr symtab_sh, dynsym_sh;
    bool info = false, line = false;
    if (debuglink && debuglink_cap)
        debuglink[0] = '\0';
    Elf_Scn *scn = NULL;
    while ((scn = elf_nextscn(elf, scn)) != NULL) {
        GElf_Shdr sh;
        if (!gelf_getshdr(scn, &sh))
            continue;
        if (sh.sh_type == SHT_SYMTAB && !symtab) {
            symtab = scn;
            symtab_sh = sh;
        } else if (sh.sh_type == SHT_DYNSYM && !dynsym) {
            dynsym = scn;
            dynsym_sh = sh;
        }
        const char *name = have_shstr ? elf_strptr(elf, shstrndx, sh.sh_name) : NULL;
        if (!name || sh.sh_type == SHT_NOBITS)
            continue;
        if (!strcmp(name, ".debug_info") || !strcmp(name, ".zdebug_info"))
            info = true;
        else if (!strcmp(name, ".debug_line") || !strcmp(name, ".zdebug_line"))
            line = true;
        else if (debuglink && !strcmp(name, ".gnu_debuglink")) {
            Elf_Data *d = elf_getdata(scn, NULL);
            if (d && d->d_buf && d->d_size > 4) {
                const char *s = d->d_buf;
                size_t len = strnlen(s, d->d_size);
                size_t crc_off = (len + 4) & ~(size_t)3; /* NUL, then pad to 4 */
                if (len > 0 && len < debuglink_cap && crc_off + 4 <= d->d_size) {
                    memcpy(debuglink, s, len);
                    debuglink[len] = '\0';
                    memcpy(debuglink_crc, s + crc_off, 4); /* host order == file order on x86-64 */
                }
            }
        }
    }
    if (symtab)
        add_symbols_from(m, elf, symtab, &symtab_sh);
    else if (dynsym && want_dynsym)
        add_symbols_from(m, elf, dynsym, &dynsym_sh);
    *has_dwarf = info && line;
}

static int cmp_sym(const void *a, const void *b)
{
    const struct elf_symbol *x = a, *y = b;
    if (x->addr != y->addr)
        return x->addr < y->addr ? -1 : 1;
    if (x->pad != y->pad)
        return x->pad > y->pad ? -1 : 1; /* best first */
    if (x->size != y->size)
        return x->size > y->size ? -1 : 1;
    return x->name_off < y->name_off ? -1 : x->name_off > y->name_off; /* file order */
}

static void finish_symbols(struct elf_module *m)
{
    if (m->nsyms == 0)
        return;
    qsort(m->syms, m->nsyms, sizeof *m->syms, cmp_sym);
    size_t w = 0;
    for (size_t i = 0; i < m->nsyms; i++) {
        if (w > 0 && m->syms[w - 1].addr == m->syms[i].addr)
            continue; /* alias: the best-ranked one came first */
        m->syms[w++] = m->syms[i];
    }
    m->nsyms = w;
    m->max_end = malloc(w * sizeof *m->max_end);
    m->display = calloc(w, sizeof *m->display);
    if (!m->max_end || !m->display) {
        m->nsyms = 0; /* out of memory: behave as a module without symbols */
        return;
    }
    uint64_t mx = 0;
    for (size_t i = 0; i < w; i++) {
        uint64_t end = m->syms[i].addr + (m->syms[i].size ? m->syms[i].size : 1);
        if (end < m->syms[i].addr)
            end = UINT64_MAX;
        if (end > mx)
            mx = end;
        m->max_end[i] = mx;
    }
}

/* ------------------------------------------------------------------------- */
/* Separate debug files                                                       */
/* ------------------------------------------------------------------------- */

static bool same_file(const char *path, const struct elf_ident *id)
{
    struct stat st;
    return stat(path, &st) == 0 && st.st_dev == id->dev && st.st_ino == id->ino;
}

/* A candidate debug file is accepted when its build-id matches ours, or, when
 * either side has none, when its CRC matches the debuglink's. */
static bool debug_file_ok(const char *cand, const struct elf_ident *id, bool have_crc, uint32_t crc)
{
    if (same_file(cand, id))
        return false;
    struct elf_ident cid;
    if (elf_read_ident(cand, &cid) != 0)
        return false;
    if (id->build_id_len && cid.build_id_len)
        return id->build_id_len == cid.build_id_len &&
               memcmp(id->build_id, cid.build_id, id->build_id_len) == 0;
    uint32_t got;
    return have_crc && file_crc32(cand, &got) && got == crc;
}

static char *find_debug_file(const char *path, const struct elf_ident *id, const char *link,
                             uint32_t crc)
{
    char cand[PATH_MAX];
    if (id->build_id_len >= 2) {
        int n = snprintf(cand, sizeof cand, "%s/.build-id/%02x/", debug_root, id->build_id[0]);
        for (size_t i = 1; i < id->build_id_len && n > 0 && (size_t)n + 3 < sizeof cand; i++)
            n += snprintf(cand + n, sizeof cand - (size_t)n, "%02x", id->build_id[i]);
        if (n > 0 && (size_t)n + 7 < sizeof cand) {
            strcpy(cand + n, ".debug");
            if (debug_file_ok(cand, id, false, 0))
                return strdup(cand);
        }
    }
    if (!link || !*link || strchr(link, '/'))
        return NULL;
    /* Directory of the module: as recorded, then through symlinks. */
    char dirs[2][PATH_MAX];
    int ndirs = 0;
    const char *slash = strrchr(path, '/');
    if (slash && (size_t)(slash - path) < PATH_MAX) {
        memcpy(dirs[ndirs], path, (size_t)(slash - path));
        dirs[ndirs][slash - path] = '\0';
        ndirs++;
    }
    char real[PATH_MAX];
    if (realpath(path, real)) {
        char *s = strrchr(real, '/');
        if (s) {
            *s = '\0';
            if (ndirs == 0 || strcmp(dirs[0], real) != 0)
                snprintf(dirs[ndirs++], PATH_MAX, "%s", real);
        }
    }
    for (int d = 0; d < ndirs; d++) {
        const char *fmts[3] = {"%s%s/%s", "%s%s/.debug/%s", "%s%s/%s"};
        for (int k = 0; k < 3; k++) {
            int n = snprintf(cand, sizeof cand, fmts[k], k == 2 ? debug_root : "", dirs[d], link);
            if (n <= 0 || (size_t)n >= sizeof cand)
                continue;
            if (access(cand, R_OK) == 0 && debug_file_ok(cand, id, true, crc))
                return strdup(cand);
        }
    }
    return NULL;
}

/* ------------------------------------------------------------------------- */
/* Module loading                                                             */
/* ------------------------------------------------------------------------- */

static void read_segments(struct elf_module *m, Elf *elf)
{
    size_t phnum = 0;
    if (elf_getphdrnum(elf, &phnum) != 0 || phnum == 0 || phnum > 65536)
        return;
    m->segs = calloc(phnum, sizeof *m->segs);
    if (!m->segs)
        return;
    for (size_t i = 0; i < phnum; i++) {
        GElf_Phdr ph;
        if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD)
            continue;
        m->segs[m->nsegs++] = (struct load_seg){ph.p_offset, ph.p_vaddr, ph.p_filesz,
                                                ph.p_memsz, ph.p_flags};
    }
}

struct elf_module *elf_module_load(const char *path, const struct elf_ident *id)
{
    struct elf_module *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    m->dwarf_fd = -1;
    m->path = strdup(path);
    if (!m->path) {
        free(m);
        return NULL;
    }
    int fd = -1;
    Elf *elf = open_elf(path, &fd, NULL);
    if (!elf)
        return m; /* not ELF / unreadable: a module without symbols */
    read_segments(m, elf);
    bool main_dwarf = false;
    char link[256];
    uint32_t crc = 0;
    scan_file(m, elf, true, &main_dwarf, link, sizeof link, &crc);
    close_elf(elf, fd);
    if (main_dwarf)
        m->dwarf_path = strdup(path);

    m->debug_file = find_debug_file(path, id, link, crc);
    if (m->debug_file) {
        int dfd = -1;
        Elf *delf = open_elf(m->debug_file, &dfd, NULL);
        if (delf) {
            bool dbg_dwarf = false;
            /* Its .dynsym (if any) is NOBITS; only its .symtab is useful. */
            scan_file(m, delf, false, &dbg_dwarf, NULL, 0, NULL);
            close_elf(delf, dfd);
            if (dbg_dwarf && !m->dwarf_path)
                m->dwarf_path = strdup(m->debug_file);
        }
    }
    finish_symbols(m);
    return m;
}

void elf_module_free(struct elf_module *m)
{
    if (!m)
        return;
    if (m->display) {
        for (size_t i = 0; i < m->nsyms; i++)
            if (m->display[i] && m->display[i] != m->names + m->syms[i].name_off)
                free(m->display[i]);
        free(m->display);
    }
    free(m->cu_ranges);
    eh_frame_free(m->cfi);
    if (m->dwarf)
        dwarf_end(m->dwarf);
    close_elf(m->dwarf_elf, m->dwarf_fd);
    free(m->syms);
    free(m->max_end);
    free(m->names);
    free(m->segs);
    free(m->debug_file);
    free(m->dwarf_path);
    free(m->path);
    free(m);
}

/* ------------------------------------------------------------------------- */
/* Queries                                                                    */
/* ------------------------------------------------------------------------- */

bool elf_module_translate(const struct elf_module *m, uint64_t off, uint64_t *vaddr)
{
    const struct load_seg *best = NULL;
    /* 1: a segment whose file bytes contain the offset, executable preferred
     * (text and rodata may share a page, so two segments can both match the
     * page-aligned mapping but only one holds the exact offset). */
    for (size_t i = 0; i < m->nsegs; i++) {
        const struct load_seg *s = &m->segs[i];
        if (off >= s->offset && off - s->offset < s->filesz &&
            (!best || ((s->flags & PF_X) && !(best->flags & PF_X))))
            best = s;
    }
    /* 2: padding after a segment's file bytes (page tail): the nearest
     * segment below still gives the right vaddr, since vaddr and offset are
     * congruent modulo the page size. */
    if (!best) {
        for (size_t i = 0; i < m->nsegs; i++) {
            const struct load_seg *s = &m->segs[i];
            if (s->offset <= off && (!best || s->offset > best->offset))
                best = s;
        }
    }
    if (!best)
        return false;
    *vaddr = off - best->offset + best->vaddr;
    return true;
}

size_t elf_module_symbol_count(const struct elf_module *m)
{
    return m->nsyms;
}

const struct elf_symbol *elf_module_symbol(const struct elf_module *m, size_t idx)
{
    return idx < m->nsyms ? &m->syms[idx] : NULL;
}

size_t sym_last_at_or_below(const void *entries, size_t n, size_t size, size_t key_off, uint64_t x)
{
    if (n == 0) /* entries may be NULL then: no pointer arithmetic on it */
        return n;
    const unsigned char *base = (const unsigned char *)entries + key_off;
    uint64_t key;
    memcpy(&key, base, sizeof key);
    if (x < key)
        return n;
    size_t lo = 0, hi = n;
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        memcpy(&key, base + mid * size, sizeof key);
        if (key <= x)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

long elf_module_find_symbol(const struct elf_module *m, uint64_t vaddr)
{
    size_t lo = sym_last_at_or_below(m->syms, m->nsyms, sizeof *m->syms, offsetof(struct elf_symbol, addr), vaddr);
    if (lo == m->nsyms)
        return -1;
    for (size_t j = lo;; j--) {
        const struct elf_symbol *s = &m->syms[j];
        if (s->size ? vaddr - s->addr < s->size : vaddr == s->addr)
            return (long)j;
        /* Keep walking back only while an earlier symbol reaches past vaddr
         * (nested/overlapping symbols); normally this stops at once. */
        if (j == 0 || m->max_end[j - 1] <= vaddr)
            return -1;
    }
}

const char *elf_module_symbol_name(struct elf_module *m, size_t idx)
{
    if (idx >= m->nsyms)
        return NULL;
    if (!m->display[idx]) {
        char *raw = m->names + m->syms[idx].name_off;
        char *dem = symbolize_demangle(raw);
        m->display[idx] = dem ? dem : raw;
    }
    return m->display[idx];
}

bool elf_module_cfi_function(struct elf_module *m, uint64_t vaddr, uint64_t *start)
{
    if (!m->cfi_tried) { /* only modules with unknown PCs pay for it */
        m->cfi_tried = true;
        m->cfi = eh_frame_open(m->path);
    }
    uint64_t end;
    return m->cfi && eh_frame_find(m->cfi, vaddr, start, &end);
}

const char *elf_module_debug_file(const struct elf_module *m)
{
    return m->debug_file;
}

static int cmp_cu_range(const void *a, const void *b)
{
    const struct cu_range *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* Without .debug_aranges, dwarf_addrdie cannot find a CU; scanning every CU
 * per PC would cost O(CUs) each, so collect each CU's ranges once. */
static void build_cu_ranges(struct elf_module *m)
{
    size_t cap = 0;
    Dwarf_Off off = 0, next;
    size_t hsize;
    while (dwarf_nextcu(m->dwarf, off, &next, &hsize, NULL, NULL, NULL) == 0) {
        Dwarf_Die die;
        if (dwarf_offdie(m->dwarf, off + hsize, &die)) {
            Dwarf_Addr base, lo, hi;
            ptrdiff_t it = 0;
            while ((it = dwarf_ranges(&die, it, &base, &lo, &hi)) > 0) {
                if (hi <= lo)
                    continue;
                if (m->ncu_ranges == cap) {
                    size_t nc = cap ? cap * 2 : 256;
                    struct cu_range *r = realloc(m->cu_ranges, nc * sizeof *r);
                    if (!r)
                        goto done;
                    m->cu_ranges = r;
                    cap = nc;
                }
                m->cu_ranges[m->ncu_ranges++] = (struct cu_range){lo, hi, off + hsize};
            }
        }
        off = next;
    }
done:
    if (m->ncu_ranges)
        qsort(m->cu_ranges, m->ncu_ranges, sizeof *m->cu_ranges, cmp_cu_range);
}

int elf_module_source_line(struct elf_module *m, uint64_t vaddr, const char **file, int *line)
{
    *file = NULL;
    *line = 0;
    if (!m->dwarf_path)
        return -1;
    if (!m->dwarf_tried) {
        m->dwarf_tried = true;
        m->dwarf_elf = open_elf(m->dwarf_path, &m->dwarf_fd, NULL);
        /* libdw may open a .dwz file the debug file names: as the owner too */
        file_access_enter();
        if (m->dwarf_elf)
            m->dwarf = dwarf_begin_elf(m->dwarf_elf, DWARF_C_READ, NULL);
        file_access_leave();
        if (m->dwarf) {
            Dwarf_Aranges *ar;
            size_t nar = 0;
            m->use_aranges = dwarf_getaranges(m->dwarf, &ar, &nar) == 0 && nar > 0;
            if (!m->use_aranges)
                build_cu_ranges(m);
        }
    }
    if (!m->dwarf)
        return -1;
    Dwarf_Die cudie, *cu = NULL;
    /* without aranges: the last range with lo <= vaddr (ncu_ranges: none) */
    size_t lo = m->use_aranges ? 0
                               : sym_last_at_or_below(m->cu_ranges, m->ncu_ranges, sizeof *m->cu_ranges,
                                                      offsetof(struct cu_range, lo), vaddr);
    if (m->use_aranges) {
        cu = dwarf_addrdie(m->dwarf, vaddr, &cudie);
    } else if (lo < m->ncu_ranges) {
        /* Ranges of different CUs do not overlap in sane DWARF; look back a
         * little for the odd CU with a huge range. */
        for (size_t k = 0; k < 4; k++, lo--) {
            if (vaddr < m->cu_ranges[lo].hi) {
                cu = dwarf_offdie(m->dwarf, m->cu_ranges[lo].die_off, &cudie);
                break;
            }
            if (lo == 0)
                break;
        }
    }
    if (!cu)
        return -1;
    Dwarf_Line *l = dwarf_getsrc_die(cu, vaddr);
    if (!l)
        return -1;
    const char *src = dwarf_linesrc(l, NULL, NULL);
    int lineno = 0;
    if (!src || dwarf_lineno(l, &lineno) != 0 || lineno <= 0)
        return -1;
    *file = src;
    *line = lineno;
    return 0;
}
