/*
 * tests/unit/test_python_walk.c — sampler/common's CPython frame walker and
 * code-object resolver on a fake 3.11 address space built in memory: the
 * walker reads only through struct py_reader, so a reader over a byte array
 * stands in for the agent's (in place) and attach's (process_vm_readv).
 * Checks what both sides rely on: frames innermost first, incomplete frames
 * skipped (but not a generator's), instruction offsets, is_entry,
 * fingerprints, the PY_READ_INNERMOST hint, where the walk stops, and names
 * and lines from the resolver (ASCII and non-ASCII str, co_linetable).
 * Then the shapes other versions have: 3.9's PyFrameObject chain (f_lasti in
 * bytes, every frame an entry, co_name for the qualified name, the tid
 * through struct pthread), 3.12's C-stack shim frames marking entries,
 * 3.13's and 3.14's _Py_DebugOffsets (real bytes from pyenv's 3.13.0 and
 * Debian sid's 3.14.10, and corruptions), and 3.14's tagged f_executable.
 */
#include <CUnit/CUnit.h>
#include <string.h>

#include "sampler/common/common.h"
#include "sampler/common/python_layout.h"
#include "tests/unit/unit.h"

#define BASE 0x7f0000000000ull /* where the fake memory appears to be */
#define CODE_TYPE 0x5000ull    /* &PyCode_Type and &PyUnicode_Type: any two values */
#define UNICODE_TYPE 0x6000ull

/* Fake target memory and what the reader saw. */
static struct fake {
    _Alignas(8) uint8_t mem[16384];
    unsigned innermost_reads, reads;
    uint64_t innermost_addr[4];
} fake;

static bool fake_read(void *ctx, uint64_t addr, void *buf, size_t len, unsigned flags)
{
    struct fake *f = ctx;
    if (addr < BASE || addr + len > BASE + sizeof f->mem)
        return false;
    f->reads++;
    if ((flags & PY_READ_INNERMOST) && f->innermost_reads < 4)
        f->innermost_addr[f->innermost_reads++] = addr;
    memcpy(buf, f->mem + (addr - BASE), len);
    return true;
}

/* A vectored read as process_vm_readv does it: spans in order, stopping at
 * the first that is not all readable (fake_readv_limit: the end of the
 * readable memory, so that a test can cut a span short). */
static uint64_t fake_readv_limit = BASE + sizeof fake.mem;
static unsigned fake_readv_calls;

static unsigned fake_readv(void *ctx, const struct py_span *spans, unsigned n)
{
    struct fake *f = ctx;
    fake_readv_calls++;
    unsigned whole = 0;
    for (; whole < n; whole++) {
        const struct py_span *sp = &spans[whole];
        if (sp->addr < BASE || sp->addr + sp->len > fake_readv_limit)
            break;
        memcpy(sp->buf, f->mem + (sp->addr - BASE), sp->len);
    }
    return whole;
}

static void put64(uint64_t addr, uint64_t v) { memcpy(fake.mem + (addr - BASE), &v, 8); }
static void put32(uint64_t addr, uint32_t v) { memcpy(fake.mem + (addr - BASE), &v, 4); }
static void put8(uint64_t addr, uint8_t v) { fake.mem[addr - BASE] = v; }

/* Places (offsets into the fake memory). */
#define TSTATE (BASE + 0x100)
#define CFRAME (BASE + 0x400)
#define FRAME(i) (BASE + 0x800 + 0x100 * (i))
#define CODE(i) (BASE + 0x1000 + 0x200 * (i))
#define STR(i) (BASE + 0x2000 + 0x100 * (i))
#define LINETABLE (BASE + 0x3000)

static const struct py_layout *L;

/* A compact str object: ASCII (kind 1, ascii bit) or UCS-2 (kind 2). */
static void make_str(uint64_t at, const uint16_t *chars, size_t n, bool ascii)
{
    put64(at + L->object_type, UNICODE_TYPE);
    put64(at + L->ascii_length, n);
    unsigned kind = ascii ? 1 : 2;
    put32(at + L->ascii_state, (kind << 2) | (1u << 5) | (ascii ? 1u << 6 : 0));
    for (size_t i = 0; i < n; i++) {
        if (ascii)
            put8(at + L->ascii_data + i, (uint8_t)chars[i]);
        else
            memcpy(fake.mem + (at + L->compact_data + 2 * i - BASE), &chars[i], 2);
    }
}

static void make_code(uint64_t at, uint64_t name, uint64_t filename, uint64_t qualname, int first_line,
                      int first_traceable)
{
    put64(at + L->object_type, CODE_TYPE);
    put64(at + L->code_name, name);
    put64(at + L->code_filename, filename);
    put64(at + L->code_qualname, qualname);
    put32(at + L->code_firstlineno, (uint32_t)first_line);
    put32(at + L->code_firsttraceable, (uint32_t)first_traceable);
    put64(at + L->code_linetable, LINETABLE);
}

/* instr: code units past co_code_adaptive (prev_instr = start + 2 * instr). */
static void make_frame(unsigned i, uint64_t code, int64_t instr, uint64_t previous, uint8_t owner, uint8_t is_entry)
{
    put64(FRAME(i) + L->frame_code, code);
    put64(FRAME(i) + L->frame_previous, previous);
    put64(FRAME(i) + L->frame_instr, code + L->code_code_adaptive + (uint64_t)(2 * instr));
    put8(FRAME(i) + L->frame_owner, owner);
    if (L->frame_is_entry != PY_ABSENT)
        put8(FRAME(i) + L->frame_is_entry, is_entry);
}

/* The start of every fixture: an empty address space, Python 3.minor's
 * layout, and the strings "a.py" (STR(0)) and "f" (STR(1)). */
static void start_fixture(unsigned minor)
{
    memset(&fake, 0, sizeof fake);
    L = py_layout_find(3, minor);
    static const uint16_t a_py[] = {'a', '.', 'p', 'y'}, f[] = {'f'};
    make_str(STR(0), a_py, 4, true);
    make_str(STR(1), f, 1, true);
}

/* 3.12's and 3.14's chain through an entry shim: code 0 is f in a.py at line
 * 10; frame 0 (instr 3) -> frame 1 (instr 1) -> shim (frame 2, its f_code
 * not a code object) -> frame 3 (instr 2), whose previous is prev3. */
static void make_shim_chain(uint64_t prev3)
{
    make_code(CODE(0), STR(1), STR(0), STR(1), 10, 0);
    make_frame(0, CODE(0), 3, FRAME(1), 0, 0);
    make_frame(1, CODE(0), 1, FRAME(2), 0, 0);
    make_frame(2, 0x1234, 0, FRAME(3), L->owner_cstack, 0);
    make_frame(3, CODE(0), 2, prev3, 0, 0);
}

/* The chain, innermost first: frame 0 (code 0, instr 5), frame 1 (code 1,
 * incomplete: before its first traceable instruction), frame 2 (code 1, a
 * generator's, instr 0 before first traceable but complete), frame 3 (code
 * 0, entered from C). Code 0 is f in a.py at line 10; code 1 is g (UCS-2
 * qualified name "gé") at line 20. */
static struct py_target build(void)
{
    start_fixture(11);
    static const uint16_t g_e[] = {'g', 0xe9};
    make_str(STR(2), g_e, 2, false);
    make_code(CODE(0), STR(1), STR(0), STR(1), 10, 0);
    make_code(CODE(1), STR(2), STR(0), STR(2), 20, 3);
    make_frame(0, CODE(0), 5, FRAME(1), 0, 0);
    make_frame(1, CODE(1), 1, FRAME(2), 0, 0);
    make_frame(2, CODE(1), 0, FRAME(3), L->owner_generator, 0);
    make_frame(3, CODE(0), 2, 0, 0, 1);
    put64(TSTATE + L->tstate_cframe, CFRAME);
    put64(TSTATE + L->tstate_thread_id, 4242);
    put64(CFRAME + L->current_frame, FRAME(0));
    /* co_linetable (a bytes object): 4 code units at line +2 (kind 13, signed
     * varint 2 -> 4), then 4 at +1 more (kind 11 plus two column bytes). */
    static const uint8_t table[] = {0x80 | (13 << 3) | 3, 4, 0x80 | (11 << 3) | 3, 0, 0};
    put64(LINETABLE + L->bytes_size, sizeof table);
    memcpy(fake.mem + (LINETABLE + L->bytes_data - BASE), table, sizeof table);
    return (struct py_target){L, CODE_TYPE, UNICODE_TYPE, {fake_read, &fake, NULL, NULL}, -1, NULL, NULL, NULL};
}

static void test_layout_lookup(void)
{
    CU_ASSERT_PTR_NOT_NULL(py_layout_find(3, 11));
    CU_ASSERT_PTR_NULL(py_layout_find(3, 99));
    char buf[64];
    py_layouts_supported(buf, sizeof buf);
    CU_ASSERT_STRING_EQUAL(buf, "3.9, 3.10, 3.11, 3.12, 3.13, 3.14");
    py_layouts_supported(buf, 3); /* cut, still terminated */
    CU_ASSERT_EQUAL(strlen(buf), 2);
}

static void test_walk_frames(void)
{
    struct py_target t = build();
    uint64_t tid = 0;
    CU_ASSERT_TRUE(py_tstate_native_tid(&t, TSTATE, &tid));
    CU_ASSERT_EQUAL(tid, 4242);
    struct py_frame_ref out[8];
    unsigned n = py_walk_frames(&t, TSTATE, out, 8);
    CU_ASSERT_EQUAL_FATAL(n, 3);
    CU_ASSERT_EQUAL(out[0].code, CODE(0));
    CU_ASSERT_EQUAL(out[0].instr, 5);
    CU_ASSERT_EQUAL(out[0].is_entry, 0);
    CU_ASSERT_EQUAL(out[0].fingerprint, py_code_fingerprint(STR(1), STR(0), 10));
    CU_ASSERT_EQUAL(out[1].code, CODE(1)); /* frame 1 skipped: incomplete */
    CU_ASSERT_EQUAL(out[1].instr, 0);
    CU_ASSERT_EQUAL(out[1].fingerprint, py_code_fingerprint(STR(2), STR(0), 20));
    CU_ASSERT_EQUAL(out[2].code, CODE(0));
    CU_ASSERT_EQUAL(out[2].is_entry, 1);
    /* Only the innermost frame and its code object carry the hint. */
    CU_ASSERT_EQUAL(fake.innermost_reads, 2);
    CU_ASSERT_EQUAL(fake.innermost_addr[0], FRAME(0));
    CU_ASSERT_EQUAL(fake.innermost_addr[1], CODE(0));
    CU_ASSERT_EQUAL(py_walk_frames(&t, TSTATE, out, 2), 2); /* max is kept */
}

/* The innermost frame in the data-stack chunk the state names (3.11+) is
 * read without the innermost hint (in place), its code object still with it;
 * outside that chunk (on its way out) or with a chunk whose size does not
 * reach the frame, both carry it. With a memo, a second walk that finds the
 * same frame unmoved reads no code object for it, nor one that moved on in
 * the same call; another call at that frame (another function or caller), a
 * new f_code or another frame reads it again. */
static void test_walk_chunk_and_memo(void)
{
    struct py_target t = build();
    struct py_frame_ref out[8], first[8];
    struct py_innermost_memo memo = {0};
    const uint64_t chunk = FRAME(0) - PY_STACK_CHUNK_DATA;
    put64(TSTATE + L->tstate_datastack_chunk, chunk);
    put64(chunk + PY_STACK_CHUNK_SIZE, 0x300);
    CU_ASSERT_EQUAL_FATAL(py_walk_frames(&t, TSTATE, first, 8), 3); /* no memo: not asked */
    CU_ASSERT_EQUAL(fake.innermost_reads, 2);
    t.memo = &memo;
    fake.innermost_reads = 0;
    CU_ASSERT_EQUAL_FATAL(py_walk_frames(&t, TSTATE, out, 8), 3);
    CU_ASSERT_EQUAL(fake.innermost_reads, 1);
    CU_ASSERT_EQUAL(fake.innermost_addr[0], CODE(0)); /* only the code object */
    CU_ASSERT_EQUAL(memcmp(out, first, sizeof out[0] * 3), 0);
    memo = (struct py_innermost_memo){0}; /* nothing remembered: the reads themselves */
    fake.innermost_reads = 0;
    put64(chunk + PY_STACK_CHUNK_SIZE, PY_STACK_CHUNK_DATA + 8); /* the frame does not fit */
    CU_ASSERT_EQUAL(py_walk_frames(&t, TSTATE, out, 8), 3);
    CU_ASSERT_EQUAL(fake.innermost_reads, 2);
    memo = (struct py_innermost_memo){0};
    fake.innermost_reads = 0;
    put64(TSTATE + L->tstate_datastack_chunk, BASE + 0x3800); /* a newer chunk: frame 0 is not in it */
    put64(BASE + 0x3800 + PY_STACK_CHUNK_SIZE, 0x300);
    CU_ASSERT_EQUAL(py_walk_frames(&t, TSTATE, out, 8), 3);
    CU_ASSERT_EQUAL(fake.innermost_reads, 2);
    build();
    put64(TSTATE + L->tstate_datastack_chunk, chunk);
    put64(chunk + PY_STACK_CHUNK_SIZE, 0x300);

    memo = (struct py_innermost_memo){0};
    CU_ASSERT_EQUAL_FATAL(py_walk_frames(&t, TSTATE, out, 8), 3);
    CU_ASSERT_TRUE(memo.valid);
    CU_ASSERT_EQUAL(memcmp(out, first, sizeof out[0] * 3), 0);
    fake.innermost_reads = 0;
    CU_ASSERT_EQUAL_FATAL(py_walk_frames(&t, TSTATE, out, 8), 3); /* unmoved: no code read */
    CU_ASSERT_EQUAL(fake.innermost_reads, 0);
    CU_ASSERT_EQUAL(memcmp(out, first, sizeof out[0] * 3), 0);
    make_frame(0, CODE(0), 6, FRAME(1), 0, 0); /* the next instruction of the same call */
    CU_ASSERT_EQUAL_FATAL(py_walk_frames(&t, TSTATE, out, 8), 3);
    CU_ASSERT_EQUAL(fake.innermost_reads, 0); /* the code object the frame held: not read */
    CU_ASSERT_EQUAL(out[0].instr, 6);
    CU_ASSERT_EQUAL(out[0].code, first[0].code);
    CU_ASSERT_EQUAL(out[0].fingerprint, first[0].fingerprint);
    for (int i = 1; i < PY_MEMO_MOVED_MAX; i++) { /* moving on, up to the bound */
        make_frame(0, CODE(0), 6 + i % 2, FRAME(1), 0, 0);
        CU_ASSERT_EQUAL_FATAL(py_walk_frames(&t, TSTATE, out, 8), 3);
    }
    CU_ASSERT_EQUAL(fake.innermost_reads, 0);
    make_frame(0, CODE(0), 6, FRAME(1), 0, 0); /* one more: the code object is read again */
    CU_ASSERT_EQUAL_FATAL(py_walk_frames(&t, TSTATE, out, 8), 3);
    CU_ASSERT_EQUAL(fake.innermost_reads, 1);
    fake.innermost_reads = 0;
    make_frame(0, CODE(0), 5, FRAME(1), 0, 0); /* and the count starts again */
    CU_ASSERT_EQUAL_FATAL(py_walk_frames(&t, TSTATE, out, 8), 3);
    CU_ASSERT_EQUAL(fake.innermost_reads, 0);
    put64(FRAME(0) + 8, 0x4242); /* another call there (its function, say): read again */
    make_frame(0, CODE(0), 7, FRAME(1), 0, 0);
    CU_ASSERT_EQUAL_FATAL(py_walk_frames(&t, TSTATE, out, 8), 3);
    CU_ASSERT_EQUAL(fake.innermost_reads, 1);
    CU_ASSERT_EQUAL(out[0].instr, 7);
    fake.innermost_reads = 0;
    make_frame(0, CODE(0), 8, FRAME(2), 0, 0); /* the same function called from elsewhere: */
    CU_ASSERT_EQUAL_FATAL(py_walk_frames(&t, TSTATE, out, 8), 3);
    CU_ASSERT_EQUAL(fake.innermost_reads, 0); /* its code object as seen[] remembers it */
    CU_ASSERT_EQUAL(out[0].instr, 8);
    CU_ASSERT_EQUAL(out[0].fingerprint, first[0].fingerprint);
    make_frame(0, CODE(0), 6, FRAME(1), 0, 0);
    fake.innermost_reads = 0;
    make_frame(0, CODE(1), 5, FRAME(1), 0, 0); /* another code object at the same frame */
    CU_ASSERT_EQUAL_FATAL(py_walk_frames(&t, TSTATE, out, 8), 3);
    CU_ASSERT_EQUAL(fake.innermost_reads, 1);
    CU_ASSERT_EQUAL(out[0].code, CODE(1));
    CU_ASSERT_EQUAL(out[0].fingerprint, py_code_fingerprint(STR(2), STR(0), 20));
    fake.innermost_reads = 0;
    make_frame(0, CODE(0), 9, FRAME(1), 0, 0); /* the first function again: still remembered */
    CU_ASSERT_EQUAL_FATAL(py_walk_frames(&t, TSTATE, out, 8), 3);
    CU_ASSERT_EQUAL(fake.innermost_reads, 0);
    CU_ASSERT_EQUAL(out[0].code, CODE(0));
    CU_ASSERT_EQUAL(out[0].fingerprint, first[0].fingerprint);
    CU_ASSERT_EQUAL(out[0].instr, 9);
    put64(FRAME(0) + 8, 0x4343); /* under other globals, moved on: read */
    make_frame(0, CODE(0), 10, FRAME(1), 0, 0);
    CU_ASSERT_EQUAL_FATAL(py_walk_frames(&t, TSTATE, out, 8), 3);
    CU_ASSERT_EQUAL(fake.innermost_reads, 1);
    /* Called again and again from two callers in turn (each sample a new
     * call): seen[] serves PY_MEMO_MOVED_MAX of them, then reads the code
     * object again (code re-created at the same addresses must not keep an
     * old name for long). */
    fake.innermost_reads = 0;
    for (int i = 0; i < PY_MEMO_MOVED_MAX; i++) {
        make_frame(0, CODE(0), 11 + i, i % 2 ? FRAME(1) : FRAME(2), 0, 0);
        CU_ASSERT_EQUAL_FATAL(py_walk_frames(&t, TSTATE, out, 8), 3);
    }
    CU_ASSERT_EQUAL(fake.innermost_reads, 0);
    CU_ASSERT_EQUAL(out[0].instr, 11 + PY_MEMO_MOVED_MAX - 1);
    make_frame(0, CODE(0), 11 + PY_MEMO_MOVED_MAX, FRAME(2), 0, 0);
    CU_ASSERT_EQUAL_FATAL(py_walk_frames(&t, TSTATE, out, 8), 3);
    CU_ASSERT_EQUAL(fake.innermost_reads, 1);
    fake.innermost_reads = 0;
    put64(CFRAME + L->current_frame, FRAME(1)); /* frame 0 returned: frame 1 (incomplete) is not kept */
    CU_ASSERT_EQUAL(py_walk_frames(&t, TSTATE, out, 8), 2);
    CU_ASSERT_FALSE(memo.valid);
}

/* The outer frames' memo (struct py_outer_memo): a second walk of the same
 * chain takes frames 2 and 3 (complete, above the innermost) from the first
 * walk without reading their code objects, and gives the same frames; a
 * frame whose header changed (another instruction, another f_code) is read
 * again; frame 1 (incomplete, skipped) is never kept. */
static void test_walk_outer_memo(void)
{
    struct py_target t = build();
    struct py_frame_ref out[8], first[8];
    struct py_outer_memo om = {0};
    CU_ASSERT_EQUAL_FATAL(py_walk_frames(&t, TSTATE, first, 8), 3); /* no memo */
    unsigned plain = fake.reads;
    t.outer = &om;
    fake.reads = 0;
    CU_ASSERT_EQUAL_FATAL(py_walk_frames(&t, TSTATE, out, 8), 3);
    CU_ASSERT_EQUAL(fake.reads, plain); /* an empty memo reads as much */
    CU_ASSERT_EQUAL(om.n[om.half], 2);
    fake.reads = 0;
    CU_ASSERT_EQUAL_FATAL(py_walk_frames(&t, TSTATE, out, 8), 3);
    CU_ASSERT_EQUAL(fake.reads, plain - 2); /* frames 2 and 3: no code object read */
    CU_ASSERT_EQUAL(memcmp(out, first, sizeof out[0] * 3), 0);
    make_frame(3, CODE(0), 3, 0, 0, 1); /* frame 3 at another instruction */
    fake.reads = 0;
    CU_ASSERT_EQUAL_FATAL(py_walk_frames(&t, TSTATE, out, 8), 3);
    CU_ASSERT_EQUAL(fake.reads, plain - 1);
    CU_ASSERT_EQUAL(out[2].instr, 3);
    make_frame(2, CODE(0), 4, FRAME(3), L->owner_generator, 0); /* frame 2 runs code 0 now */
    fake.reads = 0;
    CU_ASSERT_EQUAL_FATAL(py_walk_frames(&t, TSTATE, out, 8), 3);
    CU_ASSERT_EQUAL(fake.reads, plain - 1);
    CU_ASSERT_EQUAL(out[1].code, CODE(0));
    CU_ASSERT_EQUAL(out[1].fingerprint, py_code_fingerprint(STR(1), STR(0), 10));
    CU_ASSERT_EQUAL(out[1].instr, 4);
}

static void test_walk_stops(void)
{
    struct py_target t = build();
    struct py_frame_ref out[8];
    put64(CODE(1) + L->object_type, 0x1234); /* frame 1's f_code is not a code object: stop there */
    CU_ASSERT_EQUAL(py_walk_frames(&t, TSTATE, out, 8), 1);
    build();
    put64(FRAME(0) + L->frame_previous, BASE + 0x100000); /* unreadable: keep what was found */
    CU_ASSERT_EQUAL(py_walk_frames(&t, TSTATE, out, 8), 1);
    build();
    put64(FRAME(0) + L->frame_previous, FRAME(1) + 4); /* misaligned: never read */
    unsigned reads = fake.reads;
    CU_ASSERT_EQUAL(py_walk_frames(&t, TSTATE, out, 8), 1);
    CU_ASSERT_EQUAL(fake.reads - reads, 4); /* cframe, current_frame, frame 0, code 0 (no memo: no chunk read) */
    CU_ASSERT_EQUAL(py_walk_frames(&t, 0, out, 8), 0);
    CU_ASSERT_EQUAL(py_walk_frames(&t, BASE + 0x100000, out, 8), 0);
}

static void test_resolve(void)
{
    struct py_target t = build();
    struct py_frame_ref out[8];
    CU_ASSERT_EQUAL_FATAL(py_walk_frames(&t, TSTATE, out, 8), 3);
    char filename[64], qualname[64];
    struct py_code_names names = {filename, sizeof filename, qualname, sizeof qualname};
    int first_line = 0, line = 0;
    CU_ASSERT_TRUE(py_code_resolve(&t, &out[0], &names, &first_line, &line));
    CU_ASSERT_STRING_EQUAL(filename, "a.py");
    CU_ASSERT_STRING_EQUAL(qualname, "f");
    CU_ASSERT_EQUAL(first_line, 10);
    CU_ASSERT_EQUAL(line, 13); /* instr 5: the second entry, 10 + 2 + 1 */
    CU_ASSERT_TRUE(py_code_resolve(&t, &out[1], &names, &first_line, &line));
    CU_ASSERT_STRING_EQUAL(qualname, "g\xc3\xa9"); /* UCS-2 to UTF-8 */
    CU_ASSERT_EQUAL(line, 22);                   /* instr 0: the first entry */
    CU_ASSERT_TRUE(py_code_resolve(&t, &out[2], NULL, &first_line, &line)); /* lines only */
    CU_ASSERT_EQUAL(line, 12);
    /* The address now holds another code object: not given the old names. */
    put32(CODE(0) + L->code_firstlineno, 11);
    CU_ASSERT_FALSE(py_code_resolve(&t, &out[0], &names, &first_line, &line));
}

/* Line tables kept (struct py_line_cache): a lines-only call for another
 * instruction of a code object resolved before reads nothing and gives the
 * line a read gives, also after the object was freed (the walk saw it
 * alive); a names call still reads; another fingerprint at the address is
 * not answered from the copy. */
static void test_resolve_line_cache(void)
{
    struct py_target t = build();
    struct py_frame_ref out[8];
    CU_ASSERT_EQUAL_FATAL(py_walk_frames(&t, TSTATE, out, 8), 3);
    char filename[64], qualname[64];
    struct py_code_names names = {filename, sizeof filename, qualname, sizeof qualname};
    int first_line = 0, line = 0, want = 0;
    struct py_frame_ref other = out[0];
    other.instr = 0; /* code 0 at its first entry */
    CU_ASSERT_TRUE(py_code_resolve(&t, &other, NULL, &first_line, &want)); /* no cache: read */
    CU_ASSERT_NOT_EQUAL(want, 13);
    t.lines = py_line_cache_new();
    CU_ASSERT_PTR_NOT_NULL_FATAL(t.lines);
    CU_ASSERT_TRUE(py_code_resolve(&t, &out[0], &names, &first_line, &line));
    CU_ASSERT_EQUAL(line, 13);
    unsigned reads = fake.reads;
    first_line = line = 0;
    CU_ASSERT_TRUE(py_code_resolve(&t, &other, NULL, &first_line, &line));
    CU_ASSERT_EQUAL(fake.reads, reads);
    CU_ASSERT_EQUAL(line, want);
    CU_ASSERT_EQUAL(first_line, 10);
    put64(CODE(0) + L->object_type, 0x1234); /* freed and reused since */
    CU_ASSERT_TRUE(py_code_resolve(&t, &other, NULL, &first_line, &line));
    CU_ASSERT_EQUAL(line, want);
    CU_ASSERT_FALSE(py_code_resolve(&t, &out[0], &names, &first_line, &line));
    struct py_frame_ref reused = other;
    reused.fingerprint ^= 1;
    reads = fake.reads;
    CU_ASSERT_FALSE(py_code_resolve(&t, &reused, NULL, &first_line, &line));
    CU_ASSERT_TRUE(fake.reads > reads);
    py_line_cache_free(t.lines);
}

/* The same names and lines through a reader with a vectored read: one
 * read for the code object and one for its three heads, and the same
 * results when that read stops short (a head past the readable memory: the
 * rest are read one by one, shorter where they must be). */
static void test_resolve_vectored(void)
{
    struct py_target t = build();
    t.mem.readv = fake_readv;
    struct py_frame_ref out[8];
    CU_ASSERT_EQUAL_FATAL(py_walk_frames(&t, TSTATE, out, 8), 3);
    char filename[64], qualname[64];
    struct py_code_names names = {filename, sizeof filename, qualname, sizeof qualname};
    int first_line = 0, line = 0;
    unsigned reads = fake.reads, calls = fake_readv_calls;
    CU_ASSERT_TRUE(py_code_resolve(&t, &out[0], &names, &first_line, &line));
    CU_ASSERT_STRING_EQUAL(filename, "a.py");
    CU_ASSERT_STRING_EQUAL(qualname, "f");
    CU_ASSERT_EQUAL(line, 13);
    CU_ASSERT_EQUAL(fake.reads - reads, 1); /* the code object; its heads in the vectored read */
    CU_ASSERT_EQUAL(fake_readv_calls - calls, 1);
    CU_ASSERT_TRUE(py_code_resolve(&t, &out[1], &names, &first_line, &line));
    CU_ASSERT_STRING_EQUAL(qualname, "g\xc3\xa9");
    CU_ASSERT_EQUAL(line, 22);
    CU_ASSERT_TRUE(py_code_resolve(&t, &out[2], NULL, &first_line, &line)); /* lines only: one head, no readv */
    CU_ASSERT_EQUAL(line, 12);
    /* The vectored read stops at the first head: each is read alone. */
    fake_readv_limit = BASE;
    filename[0] = qualname[0] = '\0';
    reads = fake.reads;
    CU_ASSERT_TRUE(py_code_resolve(&t, &out[0], &names, &first_line, &line));
    CU_ASSERT_STRING_EQUAL(filename, "a.py");
    CU_ASSERT_STRING_EQUAL(qualname, "f");
    CU_ASSERT_EQUAL(line, 13);
    CU_ASSERT_EQUAL(fake.reads - reads, 4);
    fake_readv_limit = BASE + sizeof fake.mem;
    t.mem.readv = NULL;
}

/* 3.9: tstate->frame -> PyFrameObject.f_back; frame 0 (code 0, f_lasti 10
 * bytes = 5 code units), frame 1 (code 1, f_lasti -1: not started). The
 * state's thread_id is a pthread_t whose struct holds the tid at 0x40. */
static void test_walk_3_9(void)
{
    start_fixture(9);
    CU_ASSERT_EQUAL_FATAL(L->code_qualname, PY_ABSENT);
    put64(CODE(0) + L->object_type, CODE_TYPE);
    put64(CODE(0) + L->code_name, STR(1));
    put64(CODE(0) + L->code_filename, STR(0));
    put32(CODE(0) + L->code_firstlineno, 10);
    put64(CODE(0) + L->code_linetable, LINETABLE);
    memcpy(fake.mem + (CODE(1) - BASE), fake.mem + (CODE(0) - BASE), 0x200);
    put64(FRAME(0) + L->frame_code, CODE(0));
    put64(FRAME(0) + L->frame_previous, FRAME(1));
    put32(FRAME(0) + L->frame_instr, 10);
    put64(FRAME(1) + L->frame_code, CODE(1));
    put32(FRAME(1) + L->frame_instr, (uint32_t)-1);
    put64(TSTATE + L->current_frame, FRAME(0));
    put64(TSTATE + L->tstate_thread_id, CFRAME); /* the "pthread_t" */
    put32(CFRAME + 0x40, 4343);
    /* co_lnotab: bytes 0-7 line 10, 8- line 13 */
    static const uint8_t lnotab[] = {8, 3};
    put64(LINETABLE + L->bytes_size, sizeof lnotab);
    memcpy(fake.mem + (LINETABLE + L->bytes_data - BASE), lnotab, sizeof lnotab);
    struct py_target t = {L, CODE_TYPE, UNICODE_TYPE, {fake_read, &fake, NULL, NULL}, 0x40, NULL, NULL, NULL};
    uint64_t tid = 0;
    CU_ASSERT_TRUE(py_tstate_native_tid(&t, TSTATE, &tid));
    CU_ASSERT_EQUAL(tid, 4343);
    t.pthread_tid_offset = -1; /* not found in glibc: no tid rather than a wrong one */
    CU_ASSERT_FALSE(py_tstate_native_tid(&t, TSTATE, &tid));
    t.pthread_tid_offset = 0x40;
    struct py_frame_ref out[8];
    CU_ASSERT_EQUAL_FATAL(py_walk_frames(&t, TSTATE, out, 8), 2);
    CU_ASSERT_EQUAL(out[0].instr, 5);
    CU_ASSERT_EQUAL(out[1].instr, -1);
    CU_ASSERT_EQUAL(out[0].is_entry, 1); /* each PyFrameObject is one eval call */
    CU_ASSERT_EQUAL(out[1].is_entry, 1);
    char filename[64], qualname[64];
    struct py_code_names names = {filename, sizeof filename, qualname, sizeof qualname};
    int first_line = 0, line = 0;
    CU_ASSERT_TRUE(py_code_resolve(&t, &out[0], &names, &first_line, &line));
    CU_ASSERT_STRING_EQUAL(qualname, "f"); /* co_name: 3.9 has no co_qualname */
    CU_ASSERT_EQUAL(line, 13);
    CU_ASSERT_TRUE(py_code_resolve(&t, &out[1], NULL, &first_line, &line));
    CU_ASSERT_EQUAL(line, 10); /* not started: the def line */
}

/* 3.12: frame 0 -> frame 1 -> shim -> frame 2 -> shim: frames 1 and 2 are
 * the first of their eval calls; the shims themselves (whose f_code is the
 * interpreter's trampoline, not user code) are not frames of the stack. */
static void test_walk_3_12_shims(void)
{
    start_fixture(12);
    make_shim_chain(FRAME(4));
    make_frame(4, 0x1234, 0, 0, L->owner_cstack, 0);
    put64(TSTATE + L->tstate_cframe, CFRAME);
    put64(CFRAME + L->current_frame, FRAME(0));
    struct py_target t = {L, CODE_TYPE, UNICODE_TYPE, {fake_read, &fake, NULL, NULL}, -1, NULL, NULL, NULL};
    struct py_frame_ref out[8];
    CU_ASSERT_EQUAL_FATAL(py_walk_frames(&t, TSTATE, out, 8), 3);
    CU_ASSERT_EQUAL(out[0].is_entry, 0);
    CU_ASSERT_EQUAL(out[1].is_entry, 1);
    CU_ASSERT_EQUAL(out[2].is_entry, 1);
    CU_ASSERT_EQUAL(out[0].instr, 3);
    CU_ASSERT_EQUAL(out[2].instr, 2);
}

#include "tests/unit/python_debug_offsets_fixture.inc"
#include "tests/unit/python_debug_offsets_3_14_fixture.inc"

/* bytes, a process's _Py_DebugOffsets, read as base's version: accepted,
 * equal to base's table (which came from the same build's headers), and
 * with the offsets that 3.13 and 3.14 share where they should be; the ones
 * that differ are the caller's. */
static void check_offsets_match_table(const struct py_layout *base, const uint8_t *bytes, size_t n,
                                      struct py_layout *got)
{
    char why[200] = "";
    CU_ASSERT_TRUE_FATAL(py_layout_from_debug_offsets(base, bytes, n, got, why, sizeof why));
    CU_ASSERT_EQUAL(got->interp_threads_head, 7344);
    CU_ASSERT_EQUAL(got->current_frame, 72);
    CU_ASSERT_EQUAL(got->tstate_thread_id, 160);
    CU_ASSERT_EQUAL(got->frame_instr, 56);
    CU_ASSERT_EQUAL(memcmp(got, base, sizeof *got), 0); /* the headers and the process agree */
}

/* bytes with len bytes at offset at replaced by patch are refused, the
 * reason naming what is wrong. */
static void check_patch_refused(const struct py_layout *base, const uint8_t *bytes, size_t n, size_t at,
                                const void *patch, size_t len, const char *reason)
{
    uint8_t head[1024];
    CU_ASSERT_FATAL(n <= sizeof head && at + len <= n);
    memcpy(head, bytes, n);
    memcpy(head + at, patch, len);
    struct py_layout got;
    char why[200] = "";
    CU_ASSERT_FALSE(py_layout_from_debug_offsets(base, head, n, &got, why, sizeof why));
    CU_ASSERT_PTR_NOT_NULL(strstr(why, reason));
}

/* 3.13's offsets from the process itself: real bytes give the table's
 * values; each corruption is refused with a reason, never a layout. */
static void test_debug_offsets(void)
{
    const struct py_layout *base = py_layout_find(3, 13);
    struct py_layout got;
    char why[200] = "";
    const size_t n = sizeof debug_offsets_3_13;
    check_offsets_match_table(base, debug_offsets_3_13, n, &got);
    CU_ASSERT_EQUAL(got.runtime_interpreters_head, 632);
    CU_ASSERT_EQUAL(got.frame_owner, 70);
    CU_ASSERT_EQUAL(got.code_qualname, 128);
    CU_ASSERT_EQUAL(got.code_code_adaptive, 200);

    check_patch_refused(base, debug_offsets_3_13, n, 0, "X", 1, "cookie");
    check_patch_refused(base, debug_offsets_3_13, n, 10, &(uint8_t){12}, 1, "3.12"); /* version 3.12 */
    check_patch_refused(base, debug_offsets_3_13, n, 16, &(uint8_t){1}, 1, "free-threaded");
    check_patch_refused(base, debug_offsets_3_13, n, 24, &(uint32_t){0}, 4, "runtime_state"); /* its size 0 */
    CU_ASSERT_FALSE(py_layout_from_debug_offsets(base, debug_offsets_3_13, 100, &got, why, sizeof why));
    /* The one entry point: 3.13 without readable debug offsets is refused. */
    CU_ASSERT_PTR_NULL(py_layout_for_process(3, 13, NULL, 0, why, sizeof why));
    CU_ASSERT_PTR_NULL(py_layout_for_process(3, 8, NULL, 0, why, sizeof why));
    CU_ASSERT_PTR_NOT_NULL(strstr(why, "3.8 is not supported"));
    const struct py_layout *own = py_layout_for_process(3, 13, debug_offsets_3_13, n, why, sizeof why);
    CU_ASSERT_PTR_NOT_NULL(own);
    CU_ASSERT_PTR_NOT_EQUAL(own, base);
    py_layout_release(own);
    CU_ASSERT_PTR_EQUAL(py_layout_for_process(3, 12, NULL, 0, why, sizeof why), py_layout_find(3, 12));
}

/* 3.14: f_executable is a _PyStackRef, the code object's address with tag
 * bits (1: a deferred or immortal reference, 0: a counted one); the entry
 * shim's owner is FRAME_OWNED_BY_INTERPRETER (3) and its f_executable a
 * tagged None. frame 0 (tagged) -> frame 1 (untagged) -> shim -> frame 3
 * (tagged): the three user frames, code objects untagged, frame 1 the first
 * of its eval call. Without masking (3.13's layout: tag bits 0) the walk
 * would stop at the misaligned address, never read a wrong object. */
static void test_walk_3_14_tagged(void)
{
    start_fixture(14);
    CU_ASSERT_EQUAL_FATAL(L->frame_code_tag_bits, 3);
    make_shim_chain(0);
    put64(FRAME(0) + L->frame_code, CODE(0) | 1);
    put64(FRAME(2) + L->frame_code, 0x1230 | 1);
    put64(FRAME(3) + L->frame_code, CODE(0) | 1);
    put64(TSTATE + L->current_frame, FRAME(0));
    struct py_target t = {L, CODE_TYPE, UNICODE_TYPE, {fake_read, &fake, NULL, NULL}, -1, NULL, NULL, NULL};
    struct py_frame_ref out[8];
    CU_ASSERT_EQUAL_FATAL(py_walk_frames(&t, TSTATE, out, 8), 3);
    for (unsigned i = 0; i < 3; i++)
        CU_ASSERT_EQUAL(out[i].code, CODE(0));
    CU_ASSERT_EQUAL(out[0].instr, 3);
    CU_ASSERT_EQUAL(out[1].is_entry, 1);
    CU_ASSERT_EQUAL(out[2].instr, 2);
    char filename[64], qualname[64];
    struct py_code_names names = {filename, sizeof filename, qualname, sizeof qualname};
    int first_line = 0, line = 0;
    CU_ASSERT_TRUE(py_code_resolve(&t, &out[0], &names, &first_line, &line));
    CU_ASSERT_STRING_EQUAL(qualname, "f");
    CU_ASSERT_STRING_EQUAL(filename, "a.py");
    struct py_layout untagged = *L;
    untagged.frame_code_tag_bits = 0;
    t.layout = &untagged;
    CU_ASSERT_EQUAL(py_walk_frames(&t, TSTATE, out, 8), 0);
}

/* 3.14's _Py_DebugOffsets, a longer struct with members added inside its
 * groups: read with 3.14's struct, the real bytes give the table's values
 * (which came from the same build's headers); 3.13's bytes, or 3.14's cut
 * to 3.13's length, or a free-threaded 3.14t, are refused. */
static void test_debug_offsets_3_14(void)
{
    const struct py_layout *base = py_layout_find(3, 14);
    struct py_layout got;
    char why[200] = "";
    const size_t n = sizeof debug_offsets_3_14;
    CU_ASSERT_EQUAL(n, 760);
    check_offsets_match_table(base, debug_offsets_3_14, n, &got);
    CU_ASSERT_EQUAL(got.runtime_interpreters_head, 808);
    CU_ASSERT_EQUAL(got.frame_owner, 74);
    CU_ASSERT_EQUAL(got.code_code_adaptive, 208);

    CU_ASSERT_FALSE(py_layout_from_debug_offsets(base, debug_offsets_3_13, sizeof debug_offsets_3_13, &got, why,
                                                 sizeof why));
    CU_ASSERT_PTR_NOT_NULL(strstr(why, "3.13"));
    CU_ASSERT_FALSE(py_layout_from_debug_offsets(base, debug_offsets_3_14, sizeof debug_offsets_3_13, &got, why,
                                                 sizeof why));
    CU_ASSERT_PTR_NOT_NULL(strstr(why, "760"));
    check_patch_refused(base, debug_offsets_3_14, n, 16, &(uint8_t){1}, 1, "3.14t"); /* free_threaded */
    /* interpreter_frame.owner, word 36 of 3.14's struct (3.13's word 36 is
     * code_object.size), past the frame's size. */
    check_patch_refused(base, debug_offsets_3_14, n, 8 * 36, &(uint64_t){4096}, 8, "interpreter_frame");
    const struct py_layout *own =
        py_layout_for_process(3, 14, debug_offsets_3_14, PY_RUNTIME_HEAD_BYTES < n ? 0 : n, why, sizeof why);
    CU_ASSERT_PTR_NOT_NULL(own);
    py_layout_release(own);
}

void register_python_walk_tests(void)
{
    CU_pSuite s = CU_add_suite("python_walk", NULL, NULL);
    CU_add_test(s, "one layout lookup; supported list from the table", test_layout_lookup);
    CU_add_test(s, "frames, incomplete skipped, offsets, entry, fingerprints", test_walk_frames);
    CU_add_test(s, "walk stops at a non-code f_code or unreadable frame", test_walk_stops);
    CU_add_test(s, "innermost frame in the current chunk read in place; unmoved frame memoized",
                test_walk_chunk_and_memo);
    CU_add_test(s, "outer frames unchanged since the last walk: no code object read", test_walk_outer_memo);
    CU_add_test(s, "names and lines; reused address refused", test_resolve);
    CU_add_test(s, "names and lines through a vectored read, whole or cut short", test_resolve_vectored);
    CU_add_test(s, "line tables kept: no read for a known code object's other lines", test_resolve_line_cache);
    CU_add_test(s, "3.9 frame objects: lasti in bytes, all entries, co_name, tid via pthread", test_walk_3_9);
    CU_add_test(s, "3.12 C-stack shim frames mark entries and are skipped", test_walk_3_12_shims);
    CU_add_test(s, "3.13 _Py_DebugOffsets: real bytes accepted, corruptions refused", test_debug_offsets);
    CU_add_test(s, "3.14 tagged f_executable masked; interpreter-owned shims mark entries", test_walk_3_14_tagged);
    CU_add_test(s, "3.14 _Py_DebugOffsets: its own struct; 3.13 bytes, short or 3.14t refused",
                test_debug_offsets_3_14);
}
