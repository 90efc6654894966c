/*
 * symbolize/eh_frame.c — function ranges from a module's unwind tables.
 *
 * A stripped binary has no symbol for its static functions, but its .eh_frame
 * still holds one FDE per function with the exact [start, end) of its code,
 * and .eh_frame_hdr (PT_GNU_EH_FRAME) a table of (initial location, FDE
 * address) pairs sorted by location. A lookup is a binary search in that
 * table and the decoding of one FDE (plus its CIE, for the pointer encoding).
 *
 * libdw's dwarf_cfi_addrframe + dwarf_frame_info is not used: the range it
 * gives is that of the CFI table row containing the PC (it changes after each
 * push/pop), not the FDE's, so two PCs of one function get different starts.
 *
 * The file is mapped once, on the first lookup that needs it, through libelf
 * (ELF_C_READ_MMAP), and its descriptor is closed right away: only the
 * mapping is kept. Every read is bounds-checked against the PT_LOAD file bytes
 * holding it; anything unexpected (unknown encodings, a truncated or corrupt
 * table) gives "no function", never a crash. No table (linked without
 * --eh-frame-hdr) also gives nothing.
 */
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "symbolize/symbolize_internal.h"

/* DWARF exception-header pointer encodings (LSB Core, "DWARF Extensions"). */
enum {
    PE_ABSPTR = 0x00, PE_ULEB128 = 0x01, PE_UDATA2 = 0x02, PE_UDATA4 = 0x03, PE_UDATA8 = 0x04,
    PE_SLEB128 = 0x09, PE_SDATA2 = 0x0a, PE_SDATA4 = 0x0b, PE_SDATA8 = 0x0c,
    PE_PCREL = 0x10, PE_DATAREL = 0x30, PE_APPL_MASK = 0x70, PE_INDIRECT = 0x80, PE_OMIT = 0xff,
};

struct eh_seg {
    uint64_t vaddr, offset, filesz;
};

struct eh_frame {
    Elf *elf;              /* owns the mapping of the file */
    const uint8_t *img;    /* the whole file */
    size_t size;
    bool msb, is64;
    struct eh_seg *segs;   /* PT_LOADs */
    size_t nsegs;
    uint64_t hdr_vaddr;    /* .eh_frame_hdr: base of its datarel values */
    const uint8_t *table;  /* binary search table: count entries of entsize */
    uint64_t count;
    size_t entsize;
    unsigned tenc;
};

/* A read position: p in the image, vaddr its ELF address (for pcrel). */
struct cur {
    const uint8_t *p, *end;
    uint64_t vaddr;
    bool ok;
};

/* Bytes at ELF address vaddr, up to the end of its PT_LOAD's file bytes. */
static struct cur at(const struct eh_frame *ef, uint64_t vaddr)
{
    for (size_t i = 0; i < ef->nsegs; i++) {
        const struct eh_seg *s = &ef->segs[i];
        if (vaddr < s->vaddr || vaddr - s->vaddr >= s->filesz)
            continue;
        uint64_t off = s->offset + (vaddr - s->vaddr), lim = s->offset + s->filesz;
        if (lim > ef->size || lim < s->offset || off >= lim)
            break;
        return (struct cur){ef->img + off, ef->img + lim, vaddr, true};
    }
    return (struct cur){NULL, NULL, 0, false};
}

static uint64_t get_uint(struct cur *c, const struct eh_frame *ef, size_t n)
{
    if (!c->ok || (size_t)(c->end - c->p) < n) {
        c->ok = false;
        return 0;
    }
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++)
        v |= (uint64_t)c->p[ef->msb ? n - 1 - i : i] << (8 * i);
    c->p += n;
    c->vaddr += n;
    return v;
}

static uint64_t get_leb(struct cur *c, bool is_signed)
{
    uint64_t v = 0;
    unsigned shift = 0;
    while (c->ok) {
        if (c->p >= c->end || shift >= 64) {
            c->ok = false;
            break;
        }
        uint8_t b = *c->p++;
        c->vaddr++;
        v |= (uint64_t)(b & 0x7f) << shift;
        shift += 7;
        if (!(b & 0x80)) {
            if (is_signed && shift < 64 && (b & 0x40))
                v |= ~0ull << shift;
            break;
        }
    }
    return v;
}

/* Size of a fixed-size encoded value, 0 for LEB128 or unknown formats. */
static size_t enc_size(const struct eh_frame *ef, unsigned enc)
{
    switch (enc & 0x0f) {
    case PE_ABSPTR: return ef->is64 ? 8 : 4;
    case PE_UDATA2: case PE_SDATA2: return 2;
    case PE_UDATA4: case PE_SDATA4: return 4;
    case PE_UDATA8: case PE_SDATA8: return 8;
    default: return 0;
    }
}

/* Reads a value in encoding enc. datarel: base of DW_EH_PE_datarel, which
 * only .eh_frame_hdr defines here (0: not allowed). Indirect values are read
 * but not dereferenced, which only a skipped personality pointer may be. */
static uint64_t get_enc(struct cur *c, const struct eh_frame *ef, unsigned enc, uint64_t datarel,
                        bool allow_indirect)
{
    uint64_t field = c->vaddr, v;
    if (enc == PE_OMIT || ((enc & PE_INDIRECT) && !allow_indirect)) {
        c->ok = false;
        return 0;
    }
    size_t n = enc_size(ef, enc);
    if ((enc & 0x0f) == PE_ULEB128 || (enc & 0x0f) == PE_SLEB128)
        v = get_leb(c, (enc & 0x0f) == PE_SLEB128);
    else if (n == 0)
        c->ok = false, v = 0;
    else {
        v = get_uint(c, ef, n);
        if ((enc & 0x08) && n < 8 && (v >> (8 * n - 1)) & 1) /* sdataN: sign-extend */
            v |= ~0ull << (8 * n);
    }
    switch (enc & PE_APPL_MASK) {
    case 0: break;
    case PE_PCREL: v += field; break;
    case PE_DATAREL:
        if (datarel)
            v += datarel;
        else
            c->ok = false;
        break;
    default: c->ok = false; /* textrel, funcrel, aligned: not produced for x86-64 ELF */
    }
    return ef->is64 ? v : (uint32_t)v;
}

/* Starts reading a CIE or FDE at vaddr: *c is limited to its body, *id_field
 * is the address of its CIE id / CIE pointer, read into *id. */
static bool open_entry(const struct eh_frame *ef, uint64_t vaddr, struct cur *c,
                       uint64_t *id_field, uint64_t *id)
{
    *c = at(ef, vaddr);
    uint64_t len = get_uint(c, ef, 4);
    size_t idsz = 4;
    if (len == 0xffffffffu)
        len = get_uint(c, ef, 8), idsz = 8;
    if (!c->ok || len < idsz || len > (uint64_t)(c->end - c->p))
        return false;
    c->end = c->p + len;
    *id_field = c->vaddr;
    *id = get_uint(c, ef, idsz);
    return c->ok;
}

/* The pointer encoding of the FDEs of the CIE at cie_vaddr: its 'R'
 * augmentation, absptr without one; -1 when it cannot be told. */
static int cie_fde_encoding(const struct eh_frame *ef, uint64_t cie_vaddr)
{
    struct cur c;
    uint64_t idf, id;
    if (!open_entry(ef, cie_vaddr, &c, &idf, &id) || id != 0)
        return -1; /* .eh_frame CIEs have id 0 */
    unsigned version = (unsigned)get_uint(&c, ef, 1);
    const uint8_t *aug = c.p;
    size_t alen = c.ok ? strnlen((const char *)aug, (size_t)(c.end - c.p)) : 0;
    if (!c.ok || alen == (size_t)(c.end - c.p) || (version != 1 && version != 3 && version != 4))
        return -1;
    c.p += alen + 1;
    c.vaddr += alen + 1;
    if (version == 4)
        get_uint(&c, ef, 2); /* address_size, segment_selector_size */
    get_leb(&c, false);      /* code alignment */
    get_leb(&c, true);       /* data alignment */
    if (version == 1)
        get_uint(&c, ef, 1); /* return address register */
    else
        get_leb(&c, false);
    if (alen == 0)
        return c.ok ? PE_ABSPTR : -1;
    if (aug[0] != 'z')
        return -1; /* "eh" and other pre-'z' augmentations: layout unknown */
    get_leb(&c, false); /* augmentation data length */
    for (size_t i = 1; i < alen && c.ok; i++) {
        switch (aug[i]) {
        case 'R': {
            unsigned enc = (unsigned)get_uint(&c, ef, 1);
            return c.ok ? (int)enc : -1;
        }
        case 'L': get_uint(&c, ef, 1); break;
        case 'P': {
            unsigned penc = (unsigned)get_uint(&c, ef, 1);
            if ((penc & PE_APPL_MASK) == PE_DATAREL)
                penc &= ~(unsigned)PE_APPL_MASK; /* value skipped only: base irrelevant */
            get_enc(&c, ef, penc, 0, true);
            break;
        }
        case 'S': case 'B': case 'G': break;
        default: return -1; /* unknown: cannot find 'R' past it */
        }
    }
    return c.ok ? PE_ABSPTR : -1;
}

/* [start, end) of the FDE at fde_vaddr. */
static bool read_fde(const struct eh_frame *ef, uint64_t fde_vaddr, uint64_t *start, uint64_t *end)
{
    struct cur c;
    uint64_t idf, cie_ptr;
    if (!open_entry(ef, fde_vaddr, &c, &idf, &cie_ptr) || cie_ptr == 0 || cie_ptr > idf)
        return false; /* a CIE, or a pointer before address 0 */
    int enc = cie_fde_encoding(ef, idf - cie_ptr);
    if (enc < 0)
        return false;
    uint64_t b = get_enc(&c, ef, (unsigned)enc, 0, false);
    uint64_t r = get_enc(&c, ef, (unsigned)enc & 0x0f, 0, false);
    if (!c.ok || r == 0 || b + r < b)
        return false;
    *start = b;
    *end = b + r;
    return true;
}

static void read_loads(struct eh_frame *ef, uint64_t *hdr_vaddr, bool *have_hdr)
{
    size_t phnum = 0;
    *have_hdr = false;
    if (elf_getphdrnum(ef->elf, &phnum) != 0 || phnum == 0 || phnum > 65536)
        return;
    ef->segs = calloc(phnum, sizeof *ef->segs);
    if (!ef->segs)
        return;
    for (size_t i = 0; i < phnum; i++) {
        GElf_Phdr ph;
        if (!gelf_getphdr(ef->elf, (int)i, &ph))
            continue;
        if (ph.p_type == PT_LOAD)
            ef->segs[ef->nsegs++] = (struct eh_seg){ph.p_vaddr, ph.p_offset, ph.p_filesz};
        else if (ph.p_type == PT_GNU_EH_FRAME && !*have_hdr)
            *hdr_vaddr = ph.p_vaddr, *have_hdr = true;
    }
}

/* Parses the .eh_frame_hdr header and validates its table. */
static bool read_hdr(struct eh_frame *ef, uint64_t hdr_vaddr)
{
    struct cur c = at(ef, hdr_vaddr);
    unsigned version = (unsigned)get_uint(&c, ef, 1);
    unsigned ptr_enc = (unsigned)get_uint(&c, ef, 1);
    unsigned cnt_enc = (unsigned)get_uint(&c, ef, 1);
    unsigned tenc = (unsigned)get_uint(&c, ef, 1);
    if (!c.ok || version != 1 || cnt_enc == PE_OMIT || tenc == PE_OMIT)
        return false;
    get_enc(&c, ef, ptr_enc, hdr_vaddr, false); /* eh_frame_ptr: FDEs are reached via the table */
    uint64_t count = get_enc(&c, ef, cnt_enc, hdr_vaddr, false);
    size_t n = enc_size(ef, tenc);
    unsigned appl = tenc & PE_APPL_MASK;
    /* Binary search needs fixed-size entries; GNU ld and lld write datarel|sdata4. */
    if (!c.ok || n == 0 || (tenc & PE_INDIRECT) || (appl != 0 && appl != PE_DATAREL) ||
        count == 0 || count > (uint64_t)(c.end - c.p) / (2 * n))
        return false;
    ef->hdr_vaddr = hdr_vaddr;
    ef->table = c.p;
    ef->count = count;
    ef->entsize = 2 * n;
    ef->tenc = tenc;
    return true;
}

void eh_frame_free(struct eh_frame *ef)
{
    if (!ef)
        return;
    if (ef->elf)
        elf_end(ef->elf);
    free(ef->segs);
    free(ef);
}

struct eh_frame *eh_frame_open(const char *path)
{
    elf_version(EV_CURRENT);
    /* Regular files the result's owner may read only (file_access.c): a
     * FIFO named by an untrusted result must not block open. */
    int fd = sym_open_regular(path, NULL);
    if (fd < 0)
        return NULL;
    struct eh_frame *ef = calloc(1, sizeof *ef);
    if (!ef || !(ef->elf = elf_begin(fd, ELF_C_READ_MMAP, NULL)) || elf_kind(ef->elf) != ELF_K_ELF) {
        close(fd);
        eh_frame_free(ef);
        return NULL;
    }
    size_t size = 0;
    const char *img = elf_rawfile(ef->elf, &size);
    const char *ident = elf_getident(ef->elf, NULL);
    /* The image is mapped (or read whole) by now: the descriptor can go. */
    elf_cntl(ef->elf, ELF_C_FDDONE);
    close(fd);
    uint64_t hdr_vaddr = 0;
    bool have_hdr = false;
    if (img && ident) {
        ef->img = (const uint8_t *)img;
        ef->size = size;
        ef->is64 = ident[EI_CLASS] == ELFCLASS64;
        ef->msb = ident[EI_DATA] == ELFDATA2MSB;
        read_loads(ef, &hdr_vaddr, &have_hdr);
    }
    if (!have_hdr || !read_hdr(ef, hdr_vaddr)) {
        eh_frame_free(ef);
        return NULL;
    }
    return ef;
}

static uint64_t table_val(const struct eh_frame *ef, uint64_t i, size_t half)
{
    size_t n = ef->entsize / 2;
    struct cur c = {ef->table + i * ef->entsize + half * n, ef->table + (i + 1) * ef->entsize, 0,
                    true};
    uint64_t v = get_enc(&c, ef, ef->tenc & 0x0f, 0, false);
    if ((ef->tenc & PE_APPL_MASK) == PE_DATAREL)
        v += ef->hdr_vaddr;
    return ef->is64 ? v : (uint32_t)v;
}

bool eh_frame_find(const struct eh_frame *ef, uint64_t vaddr, uint64_t *start, uint64_t *end)
{
    if (!ef || vaddr < table_val(ef, 0, 0))
        return false;
    uint64_t lo = 0, hi = ef->count; /* last entry with initial location <= vaddr */
    while (hi - lo > 1) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (table_val(ef, mid, 0) <= vaddr)
            lo = mid;
        else
            hi = mid;
    }
    uint64_t s, e;
    if (!read_fde(ef, table_val(ef, lo, 1), &s, &e) || vaddr < s || vaddr >= e)
        return false;
    *start = s;
    *end = e;
    return true;
}
