/*
 * sampler/attach/attach_python.c — Python frames of a process we are not inside.
 *
 * The in-process agent reads a thread's frames in its signal handler, at the
 * sampled instant. From outside there is no such instant: the kernel hands us
 * the sample after the fact, and the thread has run on. So the frames here
 * are read with process_vm_readv as soon as the sample is drained (the lag is
 * measured and reported); for a CPU-bound thread a fixed lag shifts every
 * sample by about the same time, which leaves the shares statistically right
 * but can pair a native stack with the Python frames of a moment later.
 *
 * How the thread's state is found: _PyRuntime (a symbol of the python
 * executable or of libpython, located through /proc/PID/maps and the file's
 * symbol table) -> interpreters.head -> threads.head -> next..., matching
 * PyThreadState.native_thread_id with the sampled tid. The layout comes from
 * python_layout.h and is checked on the live process before it is trusted:
 * every state in the list must point back to its interpreter and carry the
 * id of a thread of the process. Names and lines are resolved like the
 * agent's writer does it (code-object fingerprint, co_linetable).
 */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "sampler/attach/attach_internal.h"
#include "sampler/common/python_layout.h"

struct tid_state {
    uint32_t tid;
    uint64_t tstate;
};

struct attach_python {
    pid_t pid;
    const struct py_layout *L;
    uint64_t runtime, code_type, unicode_type;
    int verified; /* 0 not yet, 1 ok, -1 layout mismatch: off */
    bool refused; /* memory reads refused or process gone: off */
    struct tid_state *states;
    size_t nstates, states_cap;
    uint64_t last_refresh_ns;
    uint64_t interp;
    char note[320];
};

static bool rd(struct attach_python *py, uint64_t addr, void *out, size_t len)
{
    struct iovec local = {out, len};
    struct iovec remote = {(void *)(uintptr_t)addr, len};
    ssize_t n = process_vm_readv(py->pid, &local, 1, &remote, 1, 0);
    if (n == (ssize_t)len)
        return true;
    if (n < 0 && (errno == EPERM || errno == EACCES) && !py->refused) {
        py->refused = true;
        snprintf(py->note, sizeof py->note,
                 "Python frames: reading the memory of process %d was refused (%s): opprof needs the "
                 "right to ptrace it (same user and kernel.yama.ptrace_scope=0, or root/CAP_SYS_PTRACE); "
                 "native stacks only",
                 (int)py->pid, strerror(errno));
    }
    return false;
}

static bool rd64(struct attach_python *py, uint64_t addr, uint64_t *out) { return rd(py, addr, out, 8); }

/* ---- finding the runtime ------------------------------------------------ */

struct py_symbols {
    uint64_t runtime, code_type, unicode_type, version;
};

/* Values of the four symbols in one ELF file (file addresses), from .dynsym
 * or .symtab. Returns true when _PyRuntime was found. */
static bool elf_python_symbols(const char *path, struct py_symbols *s, uint64_t *first_load_vaddr)
{
    memset(s, 0, sizeof *s);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    elf_version(EV_CURRENT);
    Elf *elf = elf_begin(fd, ELF_C_READ, NULL);
    if (!elf) {
        close(fd);
        return false;
    }
    size_t nph = 0;
    *first_load_vaddr = 0;
    elf_getphdrnum(elf, &nph);
    for (size_t i = 0; i < nph; i++) {
        GElf_Phdr ph;
        if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_LOAD) {
            *first_load_vaddr = ph.p_vaddr - ph.p_offset; /* the address file offset 0 maps to */
            break;
        }
    }
    Elf_Scn *scn = NULL;
    while ((scn = elf_nextscn(elf, scn)) != NULL && !s->runtime) {
        GElf_Shdr sh;
        if (!gelf_getshdr(scn, &sh) || (sh.sh_type != SHT_DYNSYM && sh.sh_type != SHT_SYMTAB) ||
            sh.sh_entsize == 0)
            continue;
        Elf_Data *data = elf_getdata(scn, NULL);
        size_t count = sh.sh_size / sh.sh_entsize;
        for (size_t i = 0; data && i < count; i++) {
            GElf_Sym sym;
            if (!gelf_getsym(data, (int)i, &sym) || sym.st_value == 0 || sym.st_shndx == SHN_UNDEF)
                continue;
            const char *name = elf_strptr(elf, sh.sh_link, sym.st_name);
            if (!name || (name[0] != '_' && name[0] != 'P'))
                continue;
            if (!strcmp(name, "_PyRuntime"))
                s->runtime = sym.st_value;
            else if (!strcmp(name, "PyCode_Type"))
                s->code_type = sym.st_value;
            else if (!strcmp(name, "PyUnicode_Type"))
                s->unicode_type = sym.st_value;
            else if (!strcmp(name, "Py_Version"))
                s->version = sym.st_value;
        }
    }
    elf_end(elf);
    close(fd);
    return s->runtime != 0;
}

struct attach_python *attach_python_probe(pid_t pid, char *note, size_t notelen)
{
    note[0] = '\0';
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return NULL;
    char line[PATH_MAX + 128], last[PATH_MAX] = "";
    struct py_symbols sym = {0};
    uint64_t bias = 0;
    bool found = false;
    while (!found && fgets(line, sizeof line, f)) {
        unsigned long long start, end, pgoff;
        int at = 0;
        if (sscanf(line, "%llx-%llx %*s %llx %*s %*s %n", &start, &end, &pgoff, &at) < 3 || at == 0)
            continue;
        char *file = line + at;
        file[strcspn(file, "\n")] = '\0';
        const char *base = strrchr(file, '/');
        /* The first mapping of each file; only python executables and libpython. */
        if (file[0] != '/' || !strcmp(file, last) || !base || !strstr(base, "python"))
            continue;
        snprintf(last, sizeof last, "%s", file);
        uint64_t file0_vaddr;
        if (!elf_python_symbols(file, &sym, &file0_vaddr))
            continue;
        /* start maps file offset pgoff; the ELF puts offset 0 at file0_vaddr. */
        bias = start - pgoff - file0_vaddr;
        found = true;
    }
    fclose(f);
    if (!found)
        return NULL;
    struct attach_python *py = calloc(1, sizeof *py);
    if (!py)
        return NULL;
    py->pid = pid;
    py->runtime = sym.runtime + bias;
    py->code_type = sym.code_type ? sym.code_type + bias : 0;
    py->unicode_type = sym.unicode_type ? sym.unicode_type + bias : 0;
    unsigned major = 0, minor = 0;
    uint64_t version = 0;
    if (sym.version && rd(py, sym.version + bias, &version, sizeof(uint32_t))) {
        major = (unsigned)(version >> 24) & 0xff;
        minor = (unsigned)(version >> 16) & 0xff;
    }
    for (size_t i = 0; i < sizeof py_layouts / sizeof py_layouts[0]; i++)
        if (py_layouts[i]->major == major && py_layouts[i]->minor == minor)
            py->L = py_layouts[i];
    if (!py->L || !py->code_type || !py->unicode_type) {
        if (py->refused)
            snprintf(note, notelen, "%s", py->note);
        else
            snprintf(note, notelen,
                     "Python %u.%u is not supported for Python frames in attach mode (supported: 3.11): "
                     "native stacks only", major, minor);
        free(py);
        return NULL;
    }
    return py;
}

/* ---- thread states -------------------------------------------------------- */

static bool thread_exists(pid_t pid, uint64_t tid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task/%llu", (int)pid, (unsigned long long)tid);
    return tid != 0 && tid < (1ull << 32) && access(path, F_OK) == 0;
}

/* Re-reads the main interpreter's thread list into py->states; checks the
 * layout the first time a list is seen. */
static void refresh_states(struct attach_python *py)
{
    const struct py_layout *L = py->L;
    py->last_refresh_ns = attach_now_ns();
    py->nstates = 0;
    uint64_t interp = 0, ts = 0;
    if (!rd64(py, py->runtime + L->runtime_interpreters_head, &interp) || interp == 0 ||
        !rd64(py, interp + L->interp_threads_head, &ts))
        return;
    py->interp = interp;
    unsigned checked = 0, bad = 0;
    for (unsigned steps = 0; ts != 0 && steps < 4096; steps++) {
        uint64_t back = 0, ntid = 0, next = 0;
        if (!rd64(py, ts + L->tstate_interp, &back) || !rd64(py, ts + L->tstate_native_thread_id, &ntid) ||
            !rd64(py, ts + L->tstate_next, &next))
            break;
        checked++;
        /* A state whose thread already exited may linger briefly: only a
         * wrong back pointer or an impossible id counts against the layout. */
        if (back != interp || ntid == 0 || ntid >= (1ull << 32)) {
            bad++;
            break;
        }
        py->states = (py->nstates + 1 > py->states_cap)
                         ? realloc(py->states, (py->states_cap = py->states_cap ? py->states_cap * 2 : 16) *
                                                   sizeof *py->states)
                         : py->states;
        if (!py->states) {
            py->nstates = py->states_cap = 0;
            return;
        }
        py->states[py->nstates++] = (struct tid_state){(uint32_t)ntid, ts};
        ts = next;
    }
    if (py->verified == 0 && checked > 0) {
        bool any_live = false;
        for (size_t i = 0; i < py->nstates; i++)
            any_live = any_live || thread_exists(py->pid, py->states[i].tid);
        if (bad || !any_live) {
            py->verified = -1;
            snprintf(py->note, sizeof py->note,
                     "Python frames: the CPython 3.11 thread-state layout did not match process %d (its thread "
                     "list does not name its threads): native stacks only", (int)py->pid);
        } else {
            py->verified = 1;
        }
    }
}

static uint64_t state_of(struct attach_python *py, uint32_t tid)
{
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < py->nstates; i++) {
            if (py->states[i].tid != tid)
                continue;
            uint64_t ntid = 0;
            /* A state freed and reused for another thread says so. */
            if (rd64(py, py->states[i].tstate + py->L->tstate_native_thread_id, &ntid) && ntid == tid)
                return py->states[i].tstate;
        }
        /* Not known: the list changed (new thread) or the thread runs no
         * Python (an OpenMP worker); re-read at most every 20 ms. */
        if (pass == 0 && attach_now_ns() - py->last_refresh_ns > 20000000ull)
            refresh_states(py);
        else
            break;
    }
    return 0;
}

/* ---- frames ------------------------------------------------------------------ */

unsigned attach_python_capture(struct attach_python *py, uint32_t tid, struct py_frame_ref *out, unsigned max)
{
    if (!py || py->refused || py->verified < 0)
        return 0;
    const struct py_layout *L = py->L;
    uint64_t ts = state_of(py, tid);
    if (ts == 0 || py->verified != 1)
        return 0;
    uint64_t cframe = 0, frame = 0;
    if (!rd64(py, ts + L->tstate_cframe, &cframe) || cframe == 0 || (cframe & 7) ||
        !rd64(py, cframe + L->cframe_current_frame, &frame))
        return 0;
    unsigned n = 0;
    uint8_t fbuf[128], cbuf[256];
    size_t fbytes = (size_t)L->iframe_owner + 1, cbytes = (size_t)L->code_code_adaptive;
    if (fbytes > sizeof fbuf || cbytes > sizeof cbuf)
        return 0;
    for (unsigned steps = 0; frame != 0 && n < max && steps < 4 * OPR_MAX_PYFRAMES; steps++) {
        if ((frame & 7) || !rd(py, frame, fbuf, fbytes))
            break;
        uint64_t code, prev_instr, previous, type;
        memcpy(&code, fbuf + L->iframe_f_code, 8);
        memcpy(&prev_instr, fbuf + L->iframe_prev_instr, 8);
        memcpy(&previous, fbuf + L->iframe_previous, 8);
        if (code == 0 || (code & 7) || !rd(py, code, cbuf, cbytes))
            break;
        memcpy(&type, cbuf + L->object_type, 8);
        if (type != py->code_type)
            break; /* the frame changed under us: keep what was read */
        uint8_t owner = fbuf[L->iframe_owner], is_entry = fbuf[L->iframe_is_entry];
        int32_t first_traceable, first_line;
        uint64_t name, filename;
        memcpy(&first_traceable, cbuf + L->code_firsttraceable, 4);
        memcpy(&first_line, cbuf + L->code_firstlineno, 4);
        memcpy(&name, cbuf + L->code_name, 8);
        memcpy(&filename, cbuf + L->code_filename, 8);
        uint64_t code_start = code + L->code_code_adaptive;
        bool incomplete = owner != L->owner_generator &&
                          (int64_t)prev_instr < (int64_t)(code_start + 2 * (uint64_t)first_traceable);
        if (!incomplete) {
            int64_t offset = ((int64_t)prev_instr - (int64_t)code_start) / 2;
            out[n++] = (struct py_frame_ref){code, py_code_fingerprint(name, filename, first_line),
                                              offset < 0 ? -1 : (int32_t)offset, is_entry};
        }
        frame = previous;
    }
    return n;
}

/* A str object as UTF-8 (NUL-terminated). */
static bool read_str(struct attach_python *py, uint64_t obj, char *out, size_t cap)
{
    const struct py_layout *L = py->L;
    uint64_t type, length;
    uint32_t state;
    if (!rd64(py, obj + L->object_type, &type) || type != py->unicode_type || !rd64(py, obj + L->ascii_length, &length) ||
        !rd(py, obj + L->ascii_state, &state, sizeof state))
        return false;
    unsigned kind = (state >> 2) & 7, compact = (state >> 5) & 1, ascii = (state >> 6) & 1;
    if (!compact || length > 4096 || (kind != 1 && kind != 2 && kind != 4))
        return false;
    if (ascii) {
        size_t n = length < cap - 1 ? length : cap - 1;
        if (!rd(py, obj + L->ascii_data, out, n))
            return false;
        out[n] = '\0';
        return strlen(out) == n;
    }
    uint8_t raw[4096 * 4];
    if (!rd(py, obj + L->compact_data, raw, length * kind))
        return false;
    size_t o = 0;
    for (uint64_t i = 0; i < length && o + 4 < cap; i++) {
        uint32_t cp = kind == 1 ? raw[i] : kind == 2 ? ((const uint16_t *)raw)[i] : ((const uint32_t *)raw)[i];
        o += python_utf8_put(cp, out + o);
    }
    out[o] = '\0';
    return true;
}

bool attach_python_resolve(struct attach_python *py, const struct py_frame_ref *f,
                           struct attach_pycode_info *info, bool need_names)
{
    const struct py_layout *L = py->L;
    uint64_t type, name, filename, qualname, linetable;
    int32_t first_line;
    if (!rd64(py, f->code + L->object_type, &type) || type != py->code_type ||
        !rd64(py, f->code + L->code_name, &name) || !rd64(py, f->code + L->code_filename, &filename) ||
        !rd(py, f->code + L->code_firstlineno, &first_line, 4))
        return false;
    if (py_code_fingerprint(name, filename, first_line) != f->fingerprint)
        return false; /* the address holds another code object now */
    info->first_line = first_line;
    if (need_names &&
        (!rd64(py, f->code + L->code_qualname, &qualname) ||
         !read_str(py, filename, info->filename, sizeof info->filename) ||
         !read_str(py, qualname, info->qualname, sizeof info->qualname)))
        return false;
    info->line = first_line;
    uint64_t size;
    if (rd64(py, f->code + L->code_linetable, &linetable) && rd64(py, linetable + L->bytes_size, &size) &&
        size > 0 && size < (1u << 20)) {
        uint8_t *table = malloc(size);
        if (table && rd(py, linetable + L->bytes_data, table, size))
            info->line = python_line_from_table(table, size, first_line, f->instr);
        free(table);
    }
    return true;
}

const char *attach_python_take_note(struct attach_python *py)
{
    static char copy[sizeof py->note];
    if (!py || !py->note[0])
        return NULL;
    memcpy(copy, py->note, sizeof copy);
    py->note[0] = '\0';
    return copy;
}

void attach_python_free(struct attach_python *py)
{
    if (!py)
        return;
    free(py->states);
    free(py);
}
