/*
 * sampler/agent/unwind_compile.c — compiles one object's .eh_frame into the
 * handler's unwind table (format: unwind_table.h). Writer thread only (it
 * mallocs); unwind_build.c decides which objects and when.
 *
 * .eh_frame (DWARF 5 section 6.4; the LSB's "Exception Frames") is a run of
 * CIEs (alignment factors, RA column, initial instructions, encodings) and
 * FDEs (a PC range and the instructions that change the rules across it).
 * Running them gives, per PC, how to find the CFA and where the caller's
 * registers were saved; we keep the CFA, the return address and the FP.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "sampler/agent/unwind_table.h"

#if defined(__x86_64__)
/* DWARF register numbers of the x86-64 psABI: RBP 6, RSP 7, RA (RIP) 16. */
const struct unwind_arch unwind_arch_host = {
    .dwarf_sp = 7, .dwarf_fp = 6, .dwarf_ra = 16, .ra_in_lr_at_entry = false, .entry_cfa_off = 8, .entry_ra_off = -8};
#else
#error "the table unwinder knows x86-64 only (see docs/developer.md for aarch64)"
#endif

/* ---- reading .eh_frame bytes ---------------------------------------------- */

/* A bounded reader: any read past end sets bad and yields 0. */
struct cursor {
    const uint8_t *p, *end;
    bool bad;
};

static uint64_t read_fixed(struct cursor *c, unsigned size)
{
    if (c->bad || (size_t)(c->end - c->p) < size) {
        c->bad = true;
        return 0;
    }
    uint64_t v = 0;
    memcpy(&v, c->p, size); /* little-endian host */
    c->p += size;
    return v;
}

static uint64_t read_uleb(struct cursor *c)
{
    uint64_t v = 0;
    for (unsigned shift = 0; !c->bad; shift += 7) {
        if (c->p >= c->end || shift > 63) {
            c->bad = true;
            break;
        }
        uint8_t b = *c->p++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80))
            break;
    }
    return v;
}

static int64_t read_sleb(struct cursor *c)
{
    uint64_t v = 0;
    unsigned shift = 0;
    uint8_t b = 0;
    do {
        if (c->bad || c->p >= c->end || shift > 63) {
            c->bad = true;
            return 0;
        }
        b = *c->p++;
        v |= (uint64_t)(b & 0x7f) << shift;
        shift += 7;
    } while (b & 0x80);
    if (shift < 64 && (b & 0x40))
        v |= ~(uint64_t)0 << shift; /* sign-extend */
    return (int64_t)v;
}

/* DW_EH_PE_* pointer encodings (LSB, "DWARF Exception Header Encoding"):
 * low nibble the format, bits 4-6 what it is relative to, 0x80 indirect. */
enum { PE_OMIT = 0xff, PE_ABSPTR = 0x00, PE_ULEB = 0x01, PE_U2 = 0x02, PE_U4 = 0x03, PE_U8 = 0x04,
       PE_SLEB = 0x09, PE_S2 = 0x0a, PE_S4 = 0x0b, PE_S8 = 0x0c, PE_PCREL = 0x10, PE_DATAREL = 0x30 };

/* Reads one encoded pointer. datarel is relative to .eh_frame_hdr (the only
 * data base .eh_frame_hdr uses); textrel/funcrel do not occur in .eh_frame
 * on x86-64 and are refused, as is indirect (only used for personality
 * routines, which we skip by length). */
/* The bytes are parsed from a private copy (see build_wanted): the address
 * they had in the object is the copy's address + this (pc-relative pointers
 * are relative to the original). Writer thread only, set per build. */
static uint64_t copy_to_real;

static uint64_t read_encoded(struct cursor *c, uint8_t enc, uint64_t datarel_base)
{
    uint64_t here = (uint64_t)(uintptr_t)c->p + copy_to_real, v;
    if (enc == PE_OMIT)
        return 0;
    switch (enc & 0x0f) {
    case PE_ABSPTR: v = read_fixed(c, 8); break;
    case PE_ULEB: v = read_uleb(c); break;
    case PE_U2: v = read_fixed(c, 2); break;
    case PE_U4: v = read_fixed(c, 4); break;
    case PE_U8: v = read_fixed(c, 8); break;
    case PE_SLEB: v = (uint64_t)read_sleb(c); break;
    case PE_S2: v = (uint64_t)(int64_t)(int16_t)read_fixed(c, 2); break;
    case PE_S4: v = (uint64_t)(int64_t)(int32_t)read_fixed(c, 4); break;
    case PE_S8: v = read_fixed(c, 8); break;
    default: c->bad = true; return 0;
    }
    switch (enc & 0x70) {
    case 0: break;
    case PE_PCREL: v += here; break;
    case PE_DATAREL: v += datarel_base; break;
    default: c->bad = true; return 0;
    }
    return v;
}

/* ---- CIE and the rule state machine --------------------------------------- */

struct cie {
    const uint8_t *at;         /* the CIE's address, for reuse by the next FDE */
    uint64_t code_align;
    int64_t data_align;
    uint64_t ra_column;
    uint8_t fde_enc;           /* 'R' */
    bool has_aug_data;         /* 'z': FDEs carry an augmentation length */
    bool signal_frame;         /* 'S' */
    const uint8_t *insns, *insns_end;
};

/* How one register of the caller is found (DWARF register rules). */
enum rule_kind { R_UNSPEC, R_UNDEF, R_SAME, R_OFFSET, R_OTHER };
struct reg_rule {
    uint8_t kind;
    int64_t off;
};
/* The rules of one row; only the registers a stack walk needs. */
struct cfa_state {
    uint64_t cfa_reg;
    int64_t cfa_off;
    bool cfa_expr;
    uint8_t cfa_plt; /* the PLT's expression (plt_expression): the entry's push offset + 1; 0: not it */
    struct reg_rule ra, fp;
};

static bool parse_cie(const uint8_t *at, const uint8_t *limit, struct cie *out)
{
    struct cursor c = {at, limit, false};
    uint64_t len = read_fixed(&c, 4);
    if (len == 0xffffffffu)
        len = read_fixed(&c, 8);
    if (c.bad || len > (uint64_t)(limit - c.p))
        return false;
    c.end = c.p + len;
    if (read_fixed(&c, 4) != 0) /* CIE id 0 in .eh_frame */
        return false;
    uint8_t version = (uint8_t)read_fixed(&c, 1);
    if (version != 1 && version != 3 && version != 4)
        return false;
    const char *aug = (const char *)c.p;
    size_t aug_len = strnlen(aug, (size_t)(c.end - c.p));
    if (aug_len == (size_t)(c.end - c.p))
        return false;
    c.p += aug_len + 1;
    if (version == 4 && (read_fixed(&c, 1) != 8 || read_fixed(&c, 1) != 0))
        return false; /* address size 8, no segments */
    memset(out, 0, sizeof *out);
    out->at = at;
    out->code_align = read_uleb(&c);
    out->data_align = read_sleb(&c);
    out->ra_column = version == 1 ? read_fixed(&c, 1) : read_uleb(&c);
    out->fde_enc = PE_ABSPTR;
    if (aug[0] == 'z') {
        out->has_aug_data = true;
        uint64_t aug_data_len = read_uleb(&c);
        struct cursor a = {c.p, c.p + aug_data_len, aug_data_len > (uint64_t)(c.end - c.p)};
        for (size_t i = 1; i < aug_len && !a.bad; i++) {
            switch (aug[i]) {
            case 'R': out->fde_enc = (uint8_t)read_fixed(&a, 1); break;
            case 'L': read_fixed(&a, 1); break;                     /* LSDA encoding: FDE aug data, skipped */
            case 'P': read_encoded(&a, (uint8_t)read_fixed(&a, 1) & 0x7f, 0); break; /* personality */
            case 'S': out->signal_frame = true; break;
            case 'B': break;                                        /* aarch64 BTI: nothing to read */
            default: return false;                                  /* unknown: cannot skip safely */
            }
        }
        if (a.bad)
            return false;
        c.p += aug_data_len;
    } else if (aug[0] != '\0') {
        return false; /* "eh" and other pre-'z' augmentations */
    }
    if (c.bad || c.p > c.end)
        return false;
    out->insns = c.p;
    out->insns_end = c.end;
    return true;
}

/* Rows are gathered here, sorted and packed at the end. */
struct build_row {
    uint32_t off;
    uint32_t seq; /* emission order: a later FDE wins at the same PC; gaps lose */
    struct unwind_rule rule;
};
/* The rows of one FDE, in emission order (already sorted among themselves). */
struct fde_span {
    uint32_t begin_off, first_row, nrows, seq;
};
struct build {
    const struct unwind_arch *arch;
    uint64_t base, hi;
    const uint64_t *entries; /* functions that may have no FDE (unwind_build_table) */
    unsigned nentries;
    struct build_row *rows;
    size_t nrows, cap;
    struct fde_span *spans;
    size_t nspans, spans_cap;
    bool oom;
};

/* Room for `more` rows; false (b->oom) when there is none. */
static bool reserve_rows(struct build *b, size_t more)
{
    if (b->nrows + more > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 4096;
        struct build_row *r = realloc(b->rows, cap * sizeof *r);
        if (!r) {
            b->oom = true;
            return false;
        }
        b->rows = r;
        b->cap = cap;
    }
    return true;
}

static void add_row(struct build *b, uint64_t pc, const struct unwind_rule *rule)
{
    if (pc < b->base || pc > b->hi || pc - b->base > UINT32_MAX || !reserve_rows(b, 1))
        return;
    struct build_row *r = &b->rows[b->nrows];
    r->off = (uint32_t)(pc - b->base);
    r->seq = (uint32_t)b->nrows;
    r->rule = *rule;
    b->nrows++;
}

static const struct unwind_rule gap_rule = {.cfa_reg = UNWIND_REG_NONE, .why_not = UNWIND_WHY_GAP};

/* The handler's rule for one state. */
static struct unwind_rule rule_of_state(const struct build *b, const struct cie *cie, const struct cfa_state *s)
{
    struct unwind_rule r = {0};
    r.cfa_reg = UNWIND_REG_NONE;
    if (cie->signal_frame) {
        r.why_not = UNWIND_WHY_SIGNAL;
        return r;
    }
    if (s->cfa_expr || s->ra.kind == R_OTHER) {
        r.why_not = UNWIND_WHY_EXPRESSION;
        return r;
    }
    if (s->cfa_off < INT32_MIN || s->cfa_off > INT32_MAX ||
        (s->cfa_reg != b->arch->dwarf_sp && s->cfa_reg != b->arch->dwarf_fp)) {
        r.why_not = UNWIND_WHY_REGISTER;
        return r;
    }
    switch (s->ra.kind) {
    case R_OFFSET:
        if (s->ra.off < INT16_MIN || s->ra.off > INT16_MAX) {
            r.why_not = UNWIND_WHY_REGISTER;
            return r;
        }
        r.ra_where = UNWIND_AT_CFA;
        r.ra_off = (int16_t)s->ra.off;
        break;
    case R_UNDEF:
        r.ra_where = UNWIND_UNDEFINED;
        break;
    default: /* same value / unspecified: the RA is still in its register */
        if (!b->arch->ra_in_lr_at_entry) {
            r.why_not = UNWIND_WHY_REGISTER;
            return r;
        }
        r.ra_where = UNWIND_IN_LR;
        break;
    }
    switch (s->fp.kind) {
    case R_OFFSET:
        if (s->fp.off < INT16_MIN || s->fp.off > INT16_MAX) {
            r.fp_where = UNWIND_UNDEFINED;
            break;
        }
        r.fp_where = UNWIND_AT_CFA;
        r.fp_off = (int16_t)s->fp.off;
        break;
    case R_UNSPEC:
    case R_SAME:
        r.fp_where = UNWIND_SAME;
        break;
    default: /* undefined, or in another register / an expression: unknown from here on */
        r.fp_where = UNWIND_UNDEFINED;
        break;
    }
    r.cfa_reg = s->cfa_reg == b->arch->dwarf_sp ? UNWIND_REG_SP : UNWIND_REG_FP;
    r.cfa_off = (int32_t)s->cfa_off;
    if (s->cfa_plt) {
        r.cfa_reg = UNWIND_REG_SP_PLT;
        r.plt_push_at = (uint8_t)(s->cfa_plt - 1);
    }
    return r;
}

/* The rule for register reg in state s, or NULL for registers we ignore. */
static struct reg_rule *tracked(const struct build *b, const struct cie *cie, struct cfa_state *s, uint64_t reg)
{
    if (reg == cie->ra_column)
        return &s->ra;
    if (reg == b->arch->dwarf_fp)
        return &s->fp;
    return NULL;
}

#define STATE_STACK 16 /* remember_state depth; GCC and LLVM use 1-2 */

/*
 * Runs CFA instructions from c over [*loc, end_pc): each time the location
 * advances, the row for the old location is emitted (when emit). initial is
 * the state after the CIE's instructions (for DW_CFA_restore). Returns false
 * on malformed or unknown instructions: the caller then ends the FDE's rows
 * with a gap, so its PCs go to libunwind.
 */
/* Is this CFA expression the one binutils writes for a lazy PLT (16-byte
 * entries: jmp *GOT(n); push n; jmp PLT0)?
 *   breg(SP) off; breg(RA) 0; lit15; and; lit<k>; ge; lit3; shl; plus
 * that is CFA = SP + off + ((PC & 15) >= k ? 8 : 0), k = 11 for the plain
 * PLT, 10 with IBT's endbr64, 5 with MPX's bnd. Samples land on a PLT
 * entry's jmp often in code that calls through it (~0.5 % of PyTorch's
 * samples), and each took libunwind's slow path. Returns k and sets *off,
 * or -1 for any other expression. */
static int plt_expression(const struct unwind_arch *arch, const uint8_t *expr, uint64_t len, int64_t *off)
{
    struct cursor c = {expr, expr + len, false};
    if (arch->dwarf_sp > 31 || arch->dwarf_ra > 31 || c.p >= c.end || *c.p++ != 0x70 + arch->dwarf_sp)
        return -1; /* DW_OP_breg<sp> */
    *off = read_sleb(&c);
    if (c.bad || c.p >= c.end || *c.p++ != 0x70 + arch->dwarf_ra || read_sleb(&c) != 0 || c.bad)
        return -1; /* DW_OP_breg<ra> 0: the PC */
    static const uint8_t tail[] = {0x3f /* lit15 */, 0x1a /* and */, 0x30 /* lit<k> */, 0x2a /* ge */,
                                   0x33 /* lit3 */, 0x24 /* shl */, 0x22 /* plus */};
    if ((uint64_t)(c.end - c.p) != sizeof tail)
        return -1;
    int k = c.p[2] - 0x30;
    for (size_t i = 0; i < sizeof tail; i++)
        if (i != 2 && c.p[i] != tail[i])
            return -1;
    return k >= 0 && k <= 15 && *off >= 0 && *off <= 64 ? k : -1;
}

static bool run_cfa(struct build *b, const struct cie *cie, struct cursor *c, struct cfa_state *s,
                    const struct cfa_state *initial, uint64_t *loc, uint64_t end_pc, bool emit)
{
    struct cfa_state stack[STATE_STACK];
    unsigned depth = 0;
    while (c->p < c->end && !c->bad) {
        uint8_t op = (uint8_t)read_fixed(c, 1);
        uint64_t reg = 0, advance = 0;
        bool advances = false;
        struct reg_rule *rr;
        switch (op >> 6) {
        case 1: /* DW_CFA_advance_loc: delta in the low 6 bits */
            advance = (op & 0x3f) * cie->code_align;
            advances = true;
            break;
        case 2: /* DW_CFA_offset: reg in the low 6 bits, factored offset */
            if ((rr = tracked(b, cie, s, op & 0x3f)) != NULL)
                *rr = (struct reg_rule){R_OFFSET, (int64_t)read_uleb(c) * cie->data_align};
            else
                read_uleb(c);
            continue;
        case 3: /* DW_CFA_restore: back to the CIE's rule */
            if ((rr = tracked(b, cie, s, op & 0x3f)) != NULL)
                *rr = rr == &s->ra ? initial->ra : initial->fp;
            continue;
        default:
            break;
        }
        if (!advances) {
            switch (op) {
            case 0x00: break; /* DW_CFA_nop */
            case 0x02: advance = read_fixed(c, 1) * cie->code_align; advances = true; break;
            case 0x03: advance = read_fixed(c, 2) * cie->code_align; advances = true; break;
            case 0x04: advance = read_fixed(c, 4) * cie->code_align; advances = true; break;
            case 0x05: /* DW_CFA_offset_extended */
            case 0x11: /* DW_CFA_offset_extended_sf */
            case 0x2f: /* DW_CFA_GNU_negative_offset_extended */
                reg = read_uleb(c);
                {
                    int64_t off = op == 0x11 ? read_sleb(c) * cie->data_align
                                             : (int64_t)read_uleb(c) * cie->data_align;
                    if ((rr = tracked(b, cie, s, reg)) != NULL)
                        *rr = (struct reg_rule){R_OFFSET, op == 0x2f ? -off : off};
                }
                break;
            case 0x06: /* DW_CFA_restore_extended */
                reg = read_uleb(c);
                if ((rr = tracked(b, cie, s, reg)) != NULL)
                    *rr = rr == &s->ra ? initial->ra : initial->fp;
                break;
            case 0x07: /* DW_CFA_undefined */
            case 0x08: /* DW_CFA_same_value */
                reg = read_uleb(c);
                if ((rr = tracked(b, cie, s, reg)) != NULL)
                    *rr = (struct reg_rule){op == 0x07 ? R_UNDEF : R_SAME, 0};
                break;
            case 0x09: /* DW_CFA_register: saved in another register */
                reg = read_uleb(c);
                read_uleb(c);
                if ((rr = tracked(b, cie, s, reg)) != NULL)
                    *rr = (struct reg_rule){R_OTHER, 0};
                break;
            case 0x0a: /* DW_CFA_remember_state */
                if (depth == STATE_STACK)
                    return false;
                stack[depth++] = *s;
                break;
            case 0x0b: /* DW_CFA_restore_state: the CFA rule is restored too (DWARF 5) */
                if (depth == 0)
                    return false;
                *s = stack[--depth];
                break;
            case 0x0c: /* DW_CFA_def_cfa */
                s->cfa_reg = read_uleb(c);
                s->cfa_off = (int64_t)read_uleb(c);
                s->cfa_expr = false;
                s->cfa_plt = 0;
                break;
            case 0x12: /* DW_CFA_def_cfa_sf */
                s->cfa_reg = read_uleb(c);
                s->cfa_off = read_sleb(c) * cie->data_align;
                s->cfa_expr = false;
                s->cfa_plt = 0;
                break;
            case 0x0d: /* DW_CFA_def_cfa_register */
            case 0x0e: /* DW_CFA_def_cfa_offset */
            case 0x13: /* DW_CFA_def_cfa_offset_sf */
                if (op == 0x0d)
                    s->cfa_reg = read_uleb(c);
                else
                    s->cfa_off = op == 0x0e ? (int64_t)read_uleb(c) : read_sleb(c) * cie->data_align;
                if (s->cfa_plt) /* only valid after a register rule: not the PLT's any more */
                    s->cfa_plt = 0, s->cfa_expr = true;
                break;
            case 0x0f: { /* DW_CFA_def_cfa_expression */
                uint64_t len = read_uleb(c);
                if (c->bad || len > (uint64_t)(c->end - c->p)) {
                    c->bad = true;
                    break;
                }
                int64_t off = 0;
                int k = plt_expression(b->arch, c->p, len, &off);
                c->p += len;
                s->cfa_expr = k < 0;
                s->cfa_plt = (uint8_t)(k + 1);
                if (k >= 0)
                    s->cfa_reg = b->arch->dwarf_sp, s->cfa_off = off;
                break;
            }
            case 0x10: /* DW_CFA_expression */
            case 0x16: /* DW_CFA_val_expression */
                reg = read_uleb(c);
                c->p += read_uleb(c);
                if ((rr = tracked(b, cie, s, reg)) != NULL)
                    *rr = (struct reg_rule){R_OTHER, 0};
                break;
            case 0x14: /* DW_CFA_val_offset */
            case 0x15: /* DW_CFA_val_offset_sf */
                reg = read_uleb(c);
                if (op == 0x14)
                    read_uleb(c);
                else
                    read_sleb(c);
                if ((rr = tracked(b, cie, s, reg)) != NULL)
                    *rr = (struct reg_rule){R_OTHER, 0};
                break;
            case 0x2e: /* DW_CFA_GNU_args_size: for exception handling only */
                read_uleb(c);
                break;
            default: /* DW_CFA_set_loc and vendor opcodes: not seen in x86-64 .eh_frame */
                return false;
            }
            if (c->p > c->end)
                c->bad = true;
        }
        if (advances && emit) {
            if (*loc < end_pc) {
                struct unwind_rule r = rule_of_state(b, cie, s);
                add_row(b, *loc, &r);
            }
            *loc += advance;
        }
    }
    return !c->bad;
}

/* One FDE at fde (its length field), with its CIE already parsed. */
static void add_fde(struct build *b, const struct cie *cie, struct cursor *c, uint64_t datarel)
{
    uint64_t pc_begin = read_encoded(c, cie->fde_enc, datarel);
    uint64_t pc_range = read_encoded(c, cie->fde_enc & 0x0f, 0);
    if (cie->has_aug_data)
        c->p += read_uleb(c);
    if (c->bad || c->p > c->end || pc_range == 0 || pc_begin < b->base || pc_begin > b->hi ||
        pc_range > b->hi - pc_begin)
        return;
    size_t first_row = b->nrows;
    struct cfa_state initial = {.cfa_reg = b->arch->dwarf_sp, .cfa_off = 8, .ra = {R_UNSPEC, 0},
                                .fp = {R_UNSPEC, 0}};
    struct cursor ci = {cie->insns, cie->insns_end, false};
    uint64_t loc = pc_begin;
    if (!run_cfa(b, cie, &ci, &initial, &initial, &loc, pc_begin, false))
        return;
    struct cfa_state s = initial;
    loc = pc_begin;
    uint64_t end = pc_begin + pc_range;
    if (run_cfa(b, cie, c, &s, &initial, &loc, end, true) && loc < end) {
        struct unwind_rule r = rule_of_state(b, cie, &s);
        add_row(b, loc, &r);
    } else if (loc < end) {
        add_row(b, loc, &gap_rule); /* what we could not read goes to libunwind */
    }
    add_row(b, end, &gap_rule); /* past the function: a gap unless another FDE starts here */
    if (b->nrows > first_row && !b->oom) {
        if (b->nspans == b->spans_cap) {
            size_t cap = b->spans_cap ? b->spans_cap * 2 : 1024;
            struct fde_span *sp = realloc(b->spans, cap * sizeof *sp);
            if (!sp) {
                b->oom = true;
                return;
            }
            b->spans = sp;
            b->spans_cap = cap;
        }
        b->spans[b->nspans] = (struct fde_span){b->rows[first_row].off, (uint32_t)first_row,
                                                (uint32_t)(b->nrows - first_row), (uint32_t)b->nspans};
        b->nspans++;
    }
}

/* ---- packing a module's rows into its table ------------------------------- */

static bool is_gap(const struct unwind_rule *r) { return r->cfa_reg == UNWIND_REG_NONE && r->why_not == UNWIND_WHY_GAP; }

/* By PC; at one PC a gap (the end of the previous function) sorts before the
 * rows of a function starting there, and later rows before earlier ones
 * lose: the last row of each PC is kept. */
static int row_order(const void *pa, const void *pb)
{
    const struct build_row *a = pa, *b = pb;
    if (a->off != b->off)
        return a->off < b->off ? -1 : 1;
    bool ga = is_gap(&a->rule), gb = is_gap(&b->rule);
    if (ga != gb)
        return ga ? -1 : 1;
    return a->seq < b->seq ? -1 : a->seq > b->seq;
}

/* Index of rule r in rules (added when new). A small open-addressing hash:
 * a module has a few hundred distinct rules. Past 65535 the row gets the
 * "table full" rule (index 1) and falls back. */
struct rule_set {
    struct unwind_rule *rules;
    uint32_t *slots; /* index + 1, 0: empty */
    size_t n, nslots;
};

static uint32_t rule_hash(const struct unwind_rule *r)
{
    uint32_t h = 2166136261u;
    const uint8_t *p = (const uint8_t *)r;
    for (size_t i = 0; i < sizeof *r; i++)
        h = (h ^ p[i]) * 16777619u;
    return h;
}

static uint16_t rule_index(struct rule_set *rs, const struct unwind_rule *r)
{
    size_t i = rule_hash(r) & (rs->nslots - 1);
    while (rs->slots[i]) {
        if (memcmp(&rs->rules[rs->slots[i] - 1], r, sizeof *r) == 0)
            return (uint16_t)(rs->slots[i] - 1);
        i = (i + 1) & (rs->nslots - 1);
    }
    if (rs->n >= UINT16_MAX || rs->n >= rs->nslots / 2)
        return 1;
    rs->rules[rs->n] = *r;
    rs->slots[i] = (uint32_t)++rs->n;
    return (uint16_t)(rs->n - 1);
}

/* Sorts, drops rows that repeat the previous rule, and copies the result
 * into one read-only mmap'ed block. */
static int span_order(const void *pa, const void *pb)
{
    const struct fde_span *a = pa, *b = pb;
    if (a->begin_off != b->begin_off)
        return a->begin_off < b->begin_off ? -1 : 1;
    return a->seq < b->seq ? -1 : a->seq > b->seq;
}

/* Rows in PC order. Each FDE's rows are in order already: sorting the FDEs
 * and copying their rows is much cheaper than sorting all rows (a third of
 * libtorch_cpu's build time went to the row sort). Overlapping FDEs leave
 * the copy out of order: then the rows are sorted one by one. */
static void sort_rows(struct build *b)
{
    struct build_row *sorted = malloc(b->nrows * sizeof *sorted);
    if (sorted && b->nspans) {
        qsort(b->spans, b->nspans, sizeof b->spans[0], span_order);
        size_t n = 0;
        for (size_t i = 0; i < b->nspans; i++) {
            memcpy(sorted + n, b->rows + b->spans[i].first_row, b->spans[i].nrows * sizeof *sorted);
            n += b->spans[i].nrows;
        }
        if (n == b->nrows) {
            for (size_t i = 0; i < n; i++)
                sorted[i].seq = (uint32_t)i; /* the copy's order decides ties now */
            free(b->rows);
            b->rows = sorted;
            b->cap = n; /* add_entry_rows grows it from here */
            sorted = NULL;
        }
    }
    free(sorted);
    for (size_t i = 1; i < b->nrows; i++) {
        if (row_order(&b->rows[i - 1], &b->rows[i]) > 0) {
            qsort(b->rows, b->nrows, sizeof b->rows[0], row_order);
            return;
        }
    }
}

/* A one-byte row at each of b's entries that no FDE covers, the gap again
 * after it (rows sorted): crti.o's _init and _fini have no unwind
 * information, and the page fault of a library's first call of _init is
 * sampled at its first instruction, where the ABI fixes the rule. */
static void add_entry_rows(struct build *b)
{
    const struct unwind_arch *a = b->arch;
    struct unwind_rule entry = {.cfa_reg = UNWIND_REG_SP, .cfa_off = a->entry_cfa_off, .at_entry = 1};
    entry.ra_where = a->ra_in_lr_at_entry ? UNWIND_IN_LR : UNWIND_AT_CFA;
    entry.ra_off = a->ra_in_lr_at_entry ? 0 : a->entry_ra_off; /* fp_where: UNWIND_SAME (0) */
    for (unsigned e = 0; e < b->nentries; e++) {
        if (b->entries[e] < b->base || b->entries[e] >= b->hi || b->entries[e] - b->base >= UINT32_MAX)
            continue;
        uint32_t off = (uint32_t)(b->entries[e] - b->base);
        size_t lo = 0, hi = b->nrows; /* rows [0, lo) start at or below off */
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (b->rows[mid].off <= off)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo > 0 && !is_gap(&b->rows[lo - 1].rule))
            continue; /* an FDE covers it: its row (the last at off wins in pack) */
        size_t add = lo == b->nrows || b->rows[lo].off > off + 1 ? 2 : 1;
        if (!reserve_rows(b, add))
            return;
        memmove(&b->rows[lo + add], &b->rows[lo], (b->nrows - lo) * sizeof b->rows[0]);
        b->rows[lo] = (struct build_row){.off = off, .rule = entry};
        if (add == 2)
            b->rows[lo + 1] = (struct build_row){.off = off + 1, .rule = gap_rule};
        b->nrows += add;
    }
}

static struct unwind_table *pack(struct build *b)
{
    sort_rows(b);
    add_entry_rows(b);
    if (b->oom)
        return NULL;
    struct rule_set rs = {0};
    size_t most = b->nrows + 2 < UINT16_MAX ? b->nrows + 2 : UINT16_MAX; /* distinct rules at most */
    for (rs.nslots = 64; rs.nslots < 2 * most;)
        rs.nslots *= 2; /* at most half full */
    rs.rules = malloc(most * sizeof *rs.rules);
    rs.slots = calloc(rs.nslots, sizeof *rs.slots);
    uint16_t *rule_of = malloc((b->nrows + 1) * sizeof *rule_of);
    uint32_t *pc_off = malloc((b->nrows + 1) * sizeof *pc_off);
    struct unwind_table *t = NULL;
    if (!rs.rules || !rs.slots || !rule_of || !pc_off)
        goto out;
    rule_index(&rs, &gap_rule); /* rules[0]: no rule */
    struct unwind_rule full = gap_rule;
    full.why_not = UNWIND_WHY_FULL;
    rule_index(&rs, &full);     /* rules[1]: table full */
    size_t n = 0;
    for (size_t i = 0; i < b->nrows; i++) {
        if (i + 1 < b->nrows && b->rows[i + 1].off == b->rows[i].off)
            continue; /* the last row of a PC wins (see row_order) */
        uint16_t k = rule_index(&rs, &b->rows[i].rule);
        if (n > 0 && rule_of[n - 1] == k)
            continue; /* same rule as the row before: one row covers both */
        pc_off[n] = b->rows[i].off;
        rule_of[n] = k;
        n++;
    }
    /* Buckets up to the last row (past it, the last row's rule: a gap). */
    size_t nbuckets = n ? ((size_t)pc_off[n - 1] >> UNWIND_BUCKET_SHIFT) + 1 : 0;
    size_t rules_at, buckets_at;
    size_t bytes = unwind_table_layout((uint32_t)n, (uint32_t)rs.n, (uint32_t)nbuckets, &rules_at, &buckets_at);
    void *block = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (block == MAP_FAILED)
        goto out;
    t = block;
    unwind_table_point(t, block, bytes, b->base, (uint32_t)n, (uint32_t)rs.n, (uint32_t)nbuckets);
    memcpy((uint32_t *)t->pc_off, pc_off, n * sizeof *pc_off);
    memcpy((uint16_t *)t->rule_of, rule_of, n * sizeof *rule_of);
    memcpy((struct unwind_rule *)t->rules, rs.rules, rs.n * sizeof *rs.rules);
    unwind_table_account(bytes, false);
    uint32_t *t_bucket = (uint32_t *)t->bucket;
    for (size_t k = 0, row = 0; k < nbuckets; k++) {
        uint64_t start = (uint64_t)k << UNWIND_BUCKET_SHIFT;
        while (row + 1 < n && pc_off[row + 1] <= start)
            row++;
        t_bucket[k] = (uint32_t)row; /* below the first row: find_rule checks that first */
    }
    mprotect(block, bytes, PROT_READ); /* the handler only reads it */
out:
    free(rs.rules);
    free(rs.slots);
    free(rule_of);
    free(pc_off);
    return t;
}

/*
 * .eh_frame_hdr: u8 version (1), u8 eh_frame_ptr encoding, u8 fde_count
 * encoding, u8 table encoding, then the encoded pointer to .eh_frame. We
 * walk .eh_frame itself (every CIE and FDE, up to the zero terminator or the
 * end of the bytes given) rather than the hdr's sorted table: we want every
 * row anyway. bytes: a copy of the object's memory from its .eh_frame_hdr
 * (at real_addr) to the end of the segment holding it.
 */
struct unwind_table *unwind_build_table(const void *bytes, size_t len, uint64_t real_addr, uint64_t lo, uint64_t hi,
                                        const uint64_t *entries, unsigned nentries)
{
    const uint8_t *copy = bytes;
    copy_to_real = real_addr - (uint64_t)(uintptr_t)copy;
    struct cursor h = {copy, copy + len, false};
    if (read_fixed(&h, 1) != 1)
        return NULL;
    uint8_t ptr_enc = (uint8_t)read_fixed(&h, 1);
    read_fixed(&h, 2);
    uint64_t eh_frame_real = read_encoded(&h, ptr_enc, real_addr);
    if (h.bad || eh_frame_real < real_addr || eh_frame_real - real_addr >= len)
        return NULL; /* .eh_frame elsewhere than after its hdr in the same segment: not handled */
    const uint8_t *eh_frame = copy + (eh_frame_real - real_addr);
    uint64_t eh_frame_hdr = real_addr; /* the data-relative base */
    struct build b = {.arch = &unwind_arch_host, .base = lo, .hi = hi, .entries = entries, .nentries = nentries};
    struct cie cie = {0};
    const uint8_t *p = eh_frame, *end = copy + len;
    while (p + 4 <= end && !b.oom) {
        struct cursor c = {p, end, false};
        uint64_t len = read_fixed(&c, 4);
        if (len == 0)
            break; /* the terminator */
        if (len == 0xffffffffu)
            len = read_fixed(&c, 8);
        if (c.bad || len > (uint64_t)(end - c.p) || len < 4)
            break;
        const uint8_t *next = c.p + len;
        c.end = next;
        const uint8_t *id_at = c.p;
        uint32_t cie_ptr = (uint32_t)read_fixed(&c, 4);
        if (cie_ptr != 0) { /* an FDE: cie_ptr is the distance back to its CIE */
            const uint8_t *cie_at = id_at - cie_ptr;
            struct cie fresh;
            if (cie_at < eh_frame) {
                /* a CIE before .eh_frame: malformed, skip the FDE */
            } else if (cie.at == cie_at) {
                add_fde(&b, &cie, &c, eh_frame_hdr);
            } else if (parse_cie(cie_at, end, &fresh)) {
                cie = fresh;
                add_fde(&b, &cie, &c, eh_frame_hdr);
            }
        }
        p = next;
    }
    struct unwind_table *t = b.oom || b.nrows == 0 ? NULL : pack(&b);
    free(b.rows);
    free(b.spans);
    return t;
}
