"""Python -> C -> Python: json's C encoder (the _json extension module) calls
busy_default, a Python function, for every object it cannot encode; nearly
all CPU time is in busy_default under the C encoder. Used by
tests/integration/test_python_split.sh to check mixed-stack splicing: the C
encoder's native frames must sit between JSONEncoder.iterencode and
busy_default, which needs each version's "entry frame" marking right."""
import json
import sys
import time


class Opaque:
    pass


def busy_default(obj):
    s = 0
    for i in range(20000):
        s = (s + i) & 0xFFFF
    return s


def dump_objects(n):
    return json.dumps([Opaque() for _ in range(n)], default=busy_default)


if __name__ == "__main__":
    end = time.process_time() + (float(sys.argv[1]) if len(sys.argv) > 1 else 1.5)
    while time.process_time() < end:
        dump_objects(50)
