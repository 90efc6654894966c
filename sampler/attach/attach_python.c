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
 * py_layout_find() and is checked on the live process before it is trusted:
 * every state in the list must point back to its interpreter and carry the
 * id of a thread of the process. The frame walk and the names and lines are
 * the agent's own (sampler/common/python_walk.c and python_code.c: code-object
 * fingerprint, co_linetable); this file finds the runtime and the thread's
 * state, and reads memory for them with process_vm_readv (rd).
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
#include "sampler/common/common.h"

struct tid_state {
    uint32_t tid;
    uint64_t tstate;
};

struct attach_python {
    pid_t pid;
    struct py_target target; /* layout, type objects, and rd() as the reader */
    uint64_t runtime;
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

/* rd() as the walker's struct py_reader (python_walk.c, python_code.c):
 * attach reads everything with process_vm_readv, the innermost frame too. */
static bool rd_for_walker(void *ctx, uint64_t addr, void *buf, size_t len, unsigned flags)
{
    (void)flags;
    return rd(ctx, addr, buf, len);
}

/* Several regions in one process_vm_readv (py_reader.readv: a new code
 * object's names). A refusal is noted by the single reads that follow. */
static unsigned rdv_for_walker(void *ctx, const struct py_span *spans, unsigned n)
{
    const struct attach_python *py = ctx;
    return py_readv_task(py->pid, spans, n);
}

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

/* "3.10" out of ".../libpython3.10.so.1.0" or ".../python3.10": what says
 * the version of a CPython older than 3.11 (no Py_Version symbol). */
static bool version_from_file_name(const char *path, unsigned *major, unsigned *minor)
{
    const char *base = strrchr(path, '/');
    const char *at = base ? strstr(base, "python") : NULL;
    return at && sscanf(at + 6, "%u.%u", major, minor) == 2;
}

struct attach_python *attach_python_probe(pid_t pid, char *note, size_t notelen)
{
    note[0] = '\0';
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return NULL;
    char line[PATH_MAX + 128], last[PATH_MAX] = "", python_file[PATH_MAX] = "";
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
        snprintf(python_file, sizeof python_file, "%s", file);
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
    py->target.code_type = sym.code_type ? sym.code_type + bias : 0;
    py->target.unicode_type = sym.unicode_type ? sym.unicode_type + bias : 0;
    py->target.mem = (struct py_reader){rd_for_walker, py, rdv_for_walker, NULL};
    unsigned major = 0, minor = 0;
    uint64_t version = 0;
    if (sym.version && rd(py, sym.version + bias, &version, sizeof(uint32_t))) {
        major = (unsigned)(version >> 24) & 0xff;
        minor = (unsigned)(version >> 16) & 0xff;
    } else if (!version_from_file_name(python_file, &major, &minor)) {
        major = minor = 0; /* before 3.11 there is no Py_Version: the file name says it */
    }
    /* 3.13+ describe their own structs at the head of _PyRuntime. */
    uint8_t head[PY_RUNTIME_HEAD_BYTES];
    bool head_read = rd(py, py->runtime, head, sizeof head);
    char why[200];
    py->target.layout = py_layout_for_process(major, minor, head_read ? head : NULL, head_read ? sizeof head : 0,
                                              why, sizeof why);
    py->target.pthread_tid_offset = py_pthread_tid_offset();
    py->target.lines = py_line_cache_new(); /* NULL (out of memory): every line read */
    if (!py->target.layout || !py->target.code_type || !py->target.unicode_type) {
        if (py->refused)
            snprintf(note, notelen, "%s", py->note);
        else if (!py->target.layout)
            snprintf(note, notelen, "%s (attach mode): native stacks only", why);
        else
            snprintf(note, notelen, "Python frames: PyCode_Type or PyUnicode_Type not found: native stacks only");
        py_layout_release(py->target.layout);
        py_line_cache_free(py->target.lines);
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
    py->last_refresh_ns = attach_now_ns();
    py->nstates = 0;
    uint64_t interp = 0, ts = 0;
    if (!py_runtime_threads(&py->target, py->runtime, &interp, &ts))
        return;
    py->interp = interp;
    unsigned checked = 0, bad = 0;
    for (unsigned steps = 0; ts != 0 && steps < 4096; steps++) {
        struct py_tstate_links links;
        if (!py_tstate_links(&py->target, ts, &links))
            break;
        uint64_t back = links.interp, ntid = links.native_tid, next = links.next;
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
                     "Python frames: the CPython thread-state layout did not match process %d (its thread "
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
            if (py_tstate_native_tid(&py->target, py->states[i].tstate, &ntid) && ntid == tid)
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

/* The thread's current Python frame at the sampled instant, from the
 * kernel's copy of its user stack: 3.11 and 3.12 keep the current frame in a
 * _PyCFrame that is a local of _PyEval_EvalFrameDefault, so when the state's
 * cframe pointer (read now) lies inside the copy, the copy holds the value
 * it had when the sample was taken. False when that cannot be told (other
 * versions keep it on the heap; no stack copy; cframe outside the copy). */
static bool frame_at_sample(struct attach_python *py, uint64_t ts, const struct attach_sample_stack *st,
                            uint64_t *frame)
{
    uint64_t at = 0;
    bool on_c_stack = false;
    if (!st->bytes || !py_current_frame_slot(&py->target, ts, &at, &on_c_stack) || !on_c_stack)
        return false;
    if (at < st->sp || at - st->sp > st->len || st->len - (at - st->sp) < sizeof *frame)
        return false;
    memcpy(frame, st->bytes + (at - st->sp), sizeof *frame);
    return true;
}

/* The thread's current Python frame now (where the walker starts). */
static bool frame_now(struct attach_python *py, uint64_t ts, uint64_t *frame)
{
    uint64_t at = 0;
    bool on_c_stack;
    return py_current_frame_slot(&py->target, ts, &at, &on_c_stack) && rd(py, at, frame, sizeof *frame);
}

unsigned attach_python_capture(struct attach_python *py, uint32_t tid, const struct attach_sample_stack *st,
                               struct py_frame_ref *out, unsigned max, bool *frame_moved)
{
    *frame_moved = false;
    if (!py || py->refused || py->verified < 0)
        return 0;
    uint64_t ts = state_of(py, tid);
    if (ts == 0 || py->verified != 1)
        return 0;
    /* The frames read now are the sample's only if the thread did not move
     * on (attach_pending.c judges that from the switch records); the stack
     * copy can prove that it did, before and after the walk. */
    uint64_t then = 0, now = 0;
    bool checkable = frame_at_sample(py, ts, st, &then);
    if (checkable && (!frame_now(py, ts, &now) || now != then))
        *frame_moved = true;
    unsigned n = py_walk_frames(&py->target, ts, out, max); /* python_walk.c, the agent's walker */
    if (checkable && (!frame_now(py, ts, &now) || now != then))
        *frame_moved = true;
    return n;
}

bool attach_python_resolve(struct attach_python *py, const struct py_frame_ref *f,
                           struct attach_pycode_info *info, bool need_names)
{
    struct py_code_names names = {info->filename, sizeof info->filename, info->qualname, sizeof info->qualname};
    return py_code_resolve(&py->target, f, need_names ? &names : NULL, &info->first_line, &info->line);
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
    py_layout_release(py->target.layout);
    py_line_cache_free(py->target.lines);
    free(py);
}
