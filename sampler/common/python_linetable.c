/*
 * sampler/common/python_linetable.c — CPython's line tables (3.9 co_lnotab,
 * 3.10 co_linetable, 3.11+ co_linetable location entries) and the
 * UTF-8 encoding of non-ASCII str objects, shared by the agent's writer thread
 * and attach mode (both read the bytes out of the workload first; this only
 * decodes them).
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sampler/common/python_layout.h"

static unsigned read_varint(const uint8_t *t, size_t len, size_t *pos)
{
    unsigned val = 0, shift = 0;
    while (*pos < len) {
        uint8_t b = t[(*pos)++];
        val |= (unsigned)(b & 63) << shift;
        shift += 6;
        if (!(b & 64))
            break;
    }
    return val;
}

static int read_signed_varint(const uint8_t *t, size_t len, size_t *pos)
{
    unsigned v = read_varint(t, len, pos);
    return (v & 1) ? -(int)(v >> 1) : (int)(v >> 1);
}

/* CPython 3.11's co_linetable (Objects/locations.md): the line of the
 * instruction at code-unit offset instr, or first_line when not found. */
int python_line_from_table(const uint8_t *t, size_t len, int first_line, int32_t instr)
{
    if (instr < 0)
        return first_line;
    int line = first_line;
    int32_t addr = 0;
    size_t pos = 0;
    while (pos < len) {
        uint8_t b = t[pos++];
        if (!(b & 0x80))
            continue; /* resynchronize on an entry start */
        unsigned code = (b >> 3) & 15;
        int32_t end = addr + (b & 7) + 1;
        int entry_line = line;
        bool no_location = false;
        if (code == 15) {
            no_location = true;
        } else if (code == 14) {
            line += read_signed_varint(t, len, &pos);
            entry_line = line;
            read_varint(t, len, &pos);
            read_varint(t, len, &pos);
            read_varint(t, len, &pos);
        } else if (code == 13) {
            line += read_signed_varint(t, len, &pos);
            entry_line = line;
        } else if (code >= 10) {
            line += (int)code - 10;
            entry_line = line;
            pos += 2;
        } else {
            pos += 1;
        }
        if (instr >= addr && instr < end)
            return no_location ? line : entry_line;
        addr = end;
    }
    return line;
}

/* CPython 3.9's co_lnotab: pairs of (bytecode byte delta, signed line
 * delta); the line of byte offset x is first_line plus the line deltas of
 * every pair whose running byte offset is still <= x. */
int python_line_from_lnotab(const uint8_t *t, size_t len, int first_line, int32_t instr)
{
    if (instr < 0)
        return first_line;
    int64_t target = 2 * (int64_t)instr, addr = 0; /* the table counts bytes */
    int line = first_line;
    for (size_t pos = 0; pos + 1 < len; pos += 2) {
        addr += t[pos];
        if (addr > target)
            break;
        line += (int8_t)t[pos + 1];
    }
    return line;
}

/* CPython 3.10's co_linetable (Objects/lnotab_notes.txt): pairs of (byte
 * delta, signed line delta), each pair one address range [start, start +
 * delta) whose line is the running sum of line deltas; -128 means the range
 * has no line (it is then given the running line). Zero-length ranges only
 * move the line. */
int python_line_from_310(const uint8_t *t, size_t len, int first_line, int32_t instr)
{
    if (instr < 0)
        return first_line;
    int64_t target = 2 * (int64_t)instr, start = 0; /* the table counts bytes */
    int line = first_line;
    for (size_t pos = 0; pos + 1 < len; pos += 2) {
        int64_t end = start + t[pos];
        int8_t delta = (int8_t)t[pos + 1];
        if (delta != -128)
            line += delta;
        if (target >= start && target < end)
            return line;
        start = end;
    }
    return line;
}

int python_line_lookup(unsigned format, const uint8_t *table, size_t len, int first_line, int32_t instr)
{
    switch (format) {
    case PY_LINES_LNOTAB:
        return python_line_from_lnotab(table, len, first_line, instr);
    case PY_LINES_310:
        return python_line_from_310(table, len, first_line, instr);
    default:
        return python_line_from_table(table, len, first_line, instr);
    }
}

size_t python_utf8_put(uint32_t cp, char *out)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xc0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xe0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        out[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    out[0] = (char)(0xf0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
    out[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}
