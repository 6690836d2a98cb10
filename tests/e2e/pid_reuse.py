"""Run under forktrace (as root): forks a child that exits 11, then makes
the kernel hand the same pid to a second child (by writing pid - 1 to
/proc/sys/kernel/ns_last_pid) that exits 22. Prints "reused PID", then
"also PID..." with the pids that failed attempts gave twice (when another
process took PID, each attempt's child gets the pid after it: these are
reused too), or exits 77 when it could not force the reuse (another
process took the pid every time)."""
import os
import sys


def child(code):
    pid = os.fork()
    if pid == 0:
        os._exit(code)
    return pid


first = child(11)
os.waitpid(first, 0)
seen = set()
twice = set()
for attempt in range(200):
    with open("/proc/sys/kernel/ns_last_pid", "w") as f:
        f.write(str(first - 1))
    pid = os.fork()
    if pid == 0:
        os._exit(22 if os.getpid() == first else 0)
    os.waitpid(pid, 0)
    if pid == first:
        print(f"reused {first}")
        print(" ".join(["also"] + [str(p) for p in sorted(twice)]))
        sys.exit(0)
    (twice if pid in seen else seen).add(pid)
print("could not force pid reuse", file=sys.stderr)
sys.exit(77)
