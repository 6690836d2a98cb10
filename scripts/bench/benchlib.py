"""What the benchmarks of scripts/bench/calls.c share (events.py,
output.py): building the workload with -finstrument-functions and with -pg,
running it and reading the line it prints, counting a trace's slices."""
import os
import re
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CALLS = 22700000
UNIT_CALLS = 5675000  # calls fib 1 UNITS makes UNITS * UNIT_CALLS calls

LINE_RE = re.compile(r"(?:calls|regions)=(\d+).* ns=(\d+) cpu_ns=(\d+) parent_cpu_ns=(\d+)")


def run(cmd, env=None):
    """Runs cmd; returns (the program's own ns, its count, wall s, stderr,
    the program's CPU ns, its parent's (the tracer's) CPU ns)."""
    t0 = time.perf_counter()
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    wall = time.perf_counter() - t0
    out = r.stdout.decode(errors="replace")
    err = r.stderr.decode(errors="replace")
    m = LINE_RE.search(out)
    if r.returncode != 0 or not m:
        sys.exit("benchmark command failed (%d): %s\n%s%s" %
                 (r.returncode, " ".join(cmd), out[-2000:], err[-2000:]))
    return int(m.group(2)), int(m.group(1)), wall, err, int(m.group(3)), int(m.group(4))


def count_slices(path, cat):
    """Slices of category cat in a JSON (or .json.gz) trace: one event a line."""
    pat = '"cat":"%s"' % cat
    if path.endswith(".gz"):
        p = subprocess.run("zcat '%s' | grep -c '%s'" % (path, pat), shell=True,
                           stdout=subprocess.PIPE)
    else:
        p = subprocess.run(["grep", "-c", pat, path], stdout=subprocess.PIPE)
    return int(p.stdout.decode().strip() or 0)


def build(tmp):
    """Builds calls.c into tmp: "inst" with -finstrument-functions, "pg"
    with -pg (for uftrace). Returns their paths."""
    src = os.path.join(ROOT, "scripts/bench/calls.c")
    inc = os.path.join(ROOT, "include")
    bins = {"inst": os.path.join(tmp, "calls"), "pg": os.path.join(tmp, "calls_pg")}
    subprocess.run(["cc", "-O2", "-finstrument-functions", "-pthread", "-I", inc, "-o",
                    bins["inst"], src], check=True)
    # -pg at compile time only: linked without it there is no gcrt1.o, so
    # nothing turns glibc's profiling on and untraced mcount returns at once
    # (with it the untraced baseline would be gprof's, not a no-op).
    obj = bins["pg"] + ".o"
    subprocess.run(["cc", "-O2", "-pg", "-pthread", "-I", inc, "-c", "-o", obj, src], check=True)
    subprocess.run(["cc", "-pthread", "-o", bins["pg"], obj], check=True)
    return bins
