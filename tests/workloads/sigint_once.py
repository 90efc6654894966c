# sigint_once.py READY_FILE — handles one SIGINT gracefully: the first ends
# its busy loop, then 0.5 s of "cleanup" during which a second SIGINT (the
# default action again) would kill it; exits 0 after one, 3 if none came in
# 20 s. test_accounting.sh uses it to check that record delivers it once.
import signal, sys, time
got = []
def once(sig, frame):
    got.append(sig)
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # a second SIGINT ends the process
signal.signal(signal.SIGINT, once)
open(sys.argv[1], "w").close()
t0 = time.time()
while not got and time.time() - t0 < 20:
    pass
t1 = time.time()
while time.time() - t1 < 0.5:  # cleanup, during which a second SIGINT would kill
    pass
print("workload: %d SIGINT handled, cleaned up" % len(got), file=sys.stderr)
sys.exit(0 if got else 3)
