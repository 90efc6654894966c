# opprof record --torch-shapes: the start-up file opprof puts first on the
# workload's PYTHONPATH (sampler/record/launch_torch_shapes.c).
#
# Python imports `sitecustomize` once at start-up (site.py). This one:
#   1. takes its own directory off sys.path, so the program sees its own path;
#   2. imports the next `sitecustomize` on that path (the user's, if any), so
#      an existing one still runs;
#   3. arms opprof_torch_shapes: the dispatch hook is installed only when the
#      program imports torch; a program that never does is left alone (no
#      torch import, no hook, no file).
import os
import sys

_opprof_dir = os.path.dirname(os.path.abspath(__file__))


def _opprof_chain():
    me = sys.modules.get(__name__)
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _opprof_dir]
    # The hook module is imported from our directory, which is off sys.path now.
    import importlib.util
    spec = importlib.util.spec_from_file_location(
        "opprof_torch_shapes", os.path.join(_opprof_dir, "opprof_torch_shapes.py"))
    hook = importlib.util.module_from_spec(spec)
    sys.modules["opprof_torch_shapes"] = hook
    spec.loader.exec_module(hook)
    hook.arm()
    # The user's sitecustomize, if any, found on the path without ours.
    del sys.modules[__name__]
    try:
        import sitecustomize  # noqa: F401  (the next one on sys.path)
    except ImportError as e:
        if getattr(e, "name", None) != "sitecustomize":
            raise
        sys.modules[__name__] = me


_opprof_chain()
