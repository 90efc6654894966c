# opprof record --torch-shapes: the dispatch hook (armed by sitecustomize.py
# beside this file). Its file name is how `opprof report` recognises the
# hook's own samples ("[opprof --torch-shapes hook]"): keep the two in step
# (TORCH_SHAPES_HOOK_FILE in analyze/torch_shapes.h).
#
# What it does, once the program has imported torch:
#   - enters a TorchDispatchMode (torch.utils._python_dispatch, torch 1.13 and
#     2.x) in the importing thread and, through threading.settrace, in each
#     thread started later by the threading module; every ATen operator call
#     that reaches the Python dispatch key is counted per operator and per
#     input signature (shapes, dtypes and the other scalar/list arguments);
#   - measures its own CPU time (thread CPU clock) around one call in 16,
#     the part of the call that is the hook's and not the operator's, and
#     counts it for the 16 (a clock read costs ~1.4 us: reading it on every
#     call would double the hook's cost);
#   - writes $OPPROF_RESULT_DIR/torch_shapes.<pid>.tsv at exit and every
#     FLUSH_SECONDS (docs/format.md, "torch_shapes.<pid>.tsv"), written to a
#     temporary name and renamed so a reader never sees half a file.
# Nothing else: no FLOPs here (opprof computes them from the shapes with the
# sweep's formulas, analyze/torch_shapes.c), no output on stdout or stderr.
import atexit
import os
import sys
import threading
import time

FORMAT_VERSION = 1
FLUSH_SECONDS = 5.0
MAX_SIGNATURES_PER_OP = 256   # distinct input signatures kept per operator
MAX_ARGS = 12                 # arguments described per call
MAX_FIELD = 200               # characters of one argument's description

_state = {
    "counts": {},      # func -> calls
    "sigs": {},        # func -> {signature tuple: calls}
    "overflow": {},    # func -> calls whose signature was not kept
    "hook_ns": 0,
    "calls": 0,
    "api": "",
    "unsupported": "",
    "torch": "",
    "last_flush_ns": 0,
    "pid": os.getpid(),
}
_now = time.perf_counter_ns
_cpu = time.thread_time_ns
COST_SAMPLE_EVERY = 16        # one call in 16 measures the hook's own CPU time
_mode_class = None


def _describe(a, torch):
    """A hashable, cheap description of one argument (stringified at write time)."""
    if isinstance(a, torch.Tensor):
        return (a.dtype, tuple(a.shape))
    if a is None or isinstance(a, (bool, int, float)):
        return a
    if isinstance(a, (list, tuple)):
        if all(isinstance(x, int) for x in a):
            return ("L", tuple(a))
        if all(isinstance(x, torch.Tensor) for x in a):
            return ("T", tuple((x.dtype, tuple(x.shape)) for x in a))
        return "?"
    if isinstance(a, torch.dtype):
        return ("D", a)
    return "?"


def _text(d):
    if isinstance(d, tuple) and len(d) == 2 and not isinstance(d[0], str):
        dtype = str(d[0])
        if dtype.startswith("torch."):
            dtype = dtype[6:]
        return "%s[%s]" % (dtype, ",".join(str(x) for x in d[1]))
    if isinstance(d, tuple) and d and d[0] == "L":
        return "[%s]" % ",".join(str(x) for x in d[1])
    if isinstance(d, tuple) and d and d[0] == "T":
        return "{%s}" % " ".join(_text(x) for x in d[1])
    if isinstance(d, tuple) and d and d[0] == "D":
        s = str(d[1])
        return s[6:] if s.startswith("torch.") else s
    s = repr(d)
    for c in "\t\n\r;":
        s = s.replace(c, " ")
    return s[:MAX_FIELD]


def _op_name(func):
    try:
        return func._schema.name          # "aten::mm", as opprof's op table names it
    except Exception:
        s = str(func)                     # "aten.mm.default"
        parts = s.split(".")
        return "%s::%s" % (parts[0], parts[1]) if len(parts) > 1 else s


def _write():
    """Writes the whole table (it holds totals, so a later write replaces an
    earlier one). Silently gives up on I/O errors: the workload comes first."""
    st = _state
    rdir = os.environ.get("OPPROF_RESULT_DIR")
    if not rdir or st["pid"] != os.getpid():
        return
    lines = ["# opprof torch-shapes %d" % FORMAT_VERSION,
             "torch\t%s\t%s" % (st["torch"], st["api"] or "-"),
             "python\t%d.%d.%d" % sys.version_info[:3],
             "cost\t%d\t%d" % (st["hook_ns"], st["calls"])]
    if st["unsupported"]:
        lines.append("unsupported\t%s" % st["unsupported"])
    names = {}
    for func, n in list(st["counts"].items()):
        name = _op_name(func)
        names[func] = name
        lines.append("op\t%s\t%d\t%d" % (name, n, st["overflow"].get(func, 0)))
    for func, sigs in list(st["sigs"].items()):
        name = names.get(func) or _op_name(func)
        for sig, n in list(sigs.items()):
            lines.append("sig\t%s\t%d\t%s" % (name, n, ";".join(_text(d) for d in sig)))
    path = os.path.join(rdir, "torch_shapes.%d.tsv" % st["pid"])
    tmp = path + ".tmp"
    try:
        with open(tmp, "w") as f:
            f.write("\n".join(lines) + "\n")
        os.replace(tmp, path)
    except OSError:
        pass
    st["last_flush_ns"] = _now()


def _after_fork_in_child():
    st = _state
    # cleared in place: the mode's closure holds these very dicts
    st["counts"].clear()
    st["sigs"].clear()
    st["overflow"].clear()
    st["hook_ns"] = st["calls"] = 0
    st["pid"] = os.getpid()
    st["last_flush_ns"] = _now()


def _make_mode(torch, TorchDispatchMode):
    counts, sigs, overflow, st = _state["counts"], _state["sigs"], _state["overflow"], _state

    def note(func, args):
        counts[func] = counts.get(func, 0) + 1
        sig = tuple(_describe(a, torch) for a in args[:MAX_ARGS])
        per = sigs.get(func)
        if per is None:
            per = sigs[func] = {}
        if sig in per or len(per) < MAX_SIGNATURES_PER_OP:
            per[sig] = per.get(sig, 0) + 1
        else:
            overflow[func] = overflow.get(func, 0) + 1

    class OpprofTorchShapes(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            n = st["calls"] = st["calls"] + 1
            if n % COST_SAMPLE_EVERY:
                try:
                    note(func, args)
                except Exception:
                    pass
                return func(*args, **(kwargs or {}))
            # One call in COST_SAMPLE_EVERY measures the hook's own CPU time
            # (thread CPU clock: wall time would count the waits of a loaded
            # machine as cost); it stands for the calls in between.
            c0 = _cpu()
            try:
                note(func, args)
            except Exception:
                pass
            c1 = _cpu()
            out = func(*args, **(kwargs or {}))
            c2 = _cpu()
            flush = _now() - st["last_flush_ns"] > FLUSH_SECONDS * 1e9
            c3 = _cpu()
            st["hook_ns"] += COST_SAMPLE_EVERY * ((c1 - c0) + (c3 - c2))
            if flush:  # a periodic write is counted once, not for 16 calls
                _write()
                st["hook_ns"] += _cpu() - c3
            return out

    return OpprofTorchShapes


def _enter_in_this_thread():
    try:
        _mode_class().__enter__()
    except Exception:
        pass


def _thread_start_trace(frame, event, arg):
    # threading.settrace runs this at a new thread's first call: enter the
    # mode there, then stop tracing (it costs one call per thread).
    sys.settrace(None)
    _enter_in_this_thread()
    return None


def _install(torch):
    global _mode_class
    st = _state
    st["torch"] = getattr(torch, "__version__", "?")
    st["last_flush_ns"] = _now()
    try:
        from torch.utils._python_dispatch import TorchDispatchMode
    except Exception as e:
        st["unsupported"] = ("torch %s has no torch.utils._python_dispatch.TorchDispatchMode (%s): "
                             "operator shapes not recorded" % (st["torch"], type(e).__name__))
        _write()
        return
    st["api"] = "TorchDispatchMode"
    _mode_class = _make_mode(torch, TorchDispatchMode)
    _enter_in_this_thread()
    threading.settrace(_thread_start_trace)
    os.register_at_fork(after_in_child=_after_fork_in_child)
    atexit.register(_write)


# The wrapper that runs torch/__init__.py, then installs the hook. It is
# compiled under a file name of its own: `import torch` runs inside it, and
# samples of that import are start-up, not the hook's cost (opprof report
# charges frames of this file, opprof_torch_shapes.py, to the hook).
_WRAPPER_SOURCE = """
def wrap(exec_module, install):
    def exec_module_then_install(module):
        exec_module(module)
        try:
            install(module)
        except Exception:
            pass
    return exec_module_then_install
"""


def _wrap_exec_module(exec_module):
    ns = {}
    exec(compile(_WRAPPER_SOURCE, "<opprof --torch-shapes import watch>", "exec"), ns)
    return ns["wrap"](exec_module, _install)


class _TorchImportWatcher:
    """A meta-path finder that only watches for `import torch`: it lets the
    normal finders find torch and wraps the loader so that the hook is
    installed right after torch/__init__.py has run. One shot."""

    def find_spec(self, name, path=None, target=None):
        if name != "torch":
            return None
        try:
            sys.meta_path.remove(self)
        except ValueError:
            pass
        import importlib.util
        spec = importlib.util.find_spec("torch")
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader.exec_module = _wrap_exec_module(spec.loader.exec_module)
        return spec


def arm():
    if "torch" in sys.modules:
        _install(sys.modules["torch"])
    else:
        sys.meta_path.insert(0, _TorchImportWatcher())
