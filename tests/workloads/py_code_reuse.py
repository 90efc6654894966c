"""Module code objects that die and are re-created at the same address: the
same source compiled again and again under two file names, one second of CPU
time each (co_name "<module>" and first line 1 for all of them, so only the
file tells them apart). The sampler names a code object once per (address,
fingerprint); a fingerprint without the file name gave the second file's
frames the first one's name. Used by tests/integration/test_python_split.sh:
each file must get about half of the CPU time."""
import time

SOURCE = "s = 0\nfor i in range(20000):\n    s = (s + i) & 0xFFFF\n"


def run_as(filename, seconds):
    end = time.process_time() + seconds
    while time.process_time() < end:
        code = compile(SOURCE, filename, "exec")
        exec(code, {})
        del code


run_as("<string>", 1.0)
run_as("second_module.py", 1.0)
