#!/usr/bin/env python3
"""forktrace's process-tracing benchmark: what `forktrace run` costs per
traced process.

Runs each workload untraced, under forktrace, and under strace -f, in
interleaved rounds, each round in a new random order (the machine is
shared and noisy: interleaving spreads the noise over all of them, and
the shuffle keeps a fixed position in the round from favouring one), and
prints median wall times and the ratio of each to the untraced median of
the same run, then the median of each round's own ratio to its untraced
run with the quartiles and a 90% bootstrap interval of that median.

The loops (fork, spawn) also report their own wall time, from the first
fork to the last wait (spawn_loop prints it): the cost per process
without a tracer's fixed start and end, which a run of 2000 children
still pays in full.

Usage: scripts/bench/run.py [--build DIR] [--rounds N] [--children N]
                            [--files N] [--only fork,spawn,make]
                            [--baseline DIR] [--no-strace]

--baseline DIR adds the forktrace of another build (say, of the commit
before a change) to the same interleaved rounds, so that a change is
measured against its baseline in one run.
"""
import argparse
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def timed(cmd, cwd=None, before=None):
    """Runs cmd; returns its wall time and, for spawn_loop, the loop's own
    wall time (else None), both in seconds."""
    if before:
        before()
    t0 = time.perf_counter()
    r = subprocess.run(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    dt = time.perf_counter() - t0
    err = r.stderr.decode(errors="replace")
    if r.returncode != 0:
        sys.exit("benchmark command failed (%d): %s\n%s" %
                 (r.returncode, " ".join(cmd), err[-2000:]))
    m = re.search(r"spawn_loop: \d+ children in (\d+) ns", err)
    return dt, int(m.group(1)) / 1e9 if m else None


def ratio_summary(xs, ys, rng):
    """Median of the per-round ratios xs[i]/ys[i], its quartiles and a 90%
    bootstrap interval of the median."""
    r = sorted(a / b for a, b in zip(xs, ys))
    if len(r) < 2:
        return "%.3fx" % r[0]
    q = statistics.quantiles(r, n=4)
    boot = sorted(statistics.median(rng.choices(r, k=len(r))) for _ in range(2000))
    return "%.3fx [quartiles %.3f-%.3f; 90%% CI %.3f-%.3f]" % (
        statistics.median(r), q[0], q[2], boot[100], boot[1899])


def make_tree(n):
    d = tempfile.mkdtemp(prefix="ft-bench-make-")
    objs = []
    for i in range(n):
        with open(os.path.join(d, "f%d.c" % i), "w") as f:
            f.write("int f%d(int x) { return x * %d + 1; }\n" % (i, i))
        objs.append("f%d.o" % i)
    with open(os.path.join(d, "Makefile"), "w") as f:
        f.write("OBJS = %s\n" % " ".join(objs))
        f.write("all: $(OBJS)\n%.o: %.c\n\t$(CC) -O0 -c -o $@ $<\n")
        f.write("clean:\n\trm -f *.o\n")
    return d


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--children", type=int, default=2000)
    ap.add_argument("--files", type=int, default=1000)
    ap.add_argument("--only", default="fork,spawn,make")
    ap.add_argument("--no-strace", action="store_true")
    ap.add_argument("--baseline", help="another build dir whose forktrace runs too")
    ap.add_argument("--seed", type=int, help="seed of the round order shuffle")
    a = ap.parse_args()
    if a.rounds < 1:
        sys.exit("--rounds must be at least 1")
    seed = a.seed if a.seed is not None else random.SystemRandom().randrange(1 << 30)
    rng = random.Random(seed)         # the order of each round
    boot_rng = random.Random(seed)    # the bootstrap: the same seed, the same order

    ft = os.path.join(os.path.abspath(a.build), "bin", "forktrace")
    tmp = tempfile.mkdtemp(prefix="ft-bench-")
    loop = os.path.join(tmp, "spawn_loop")
    subprocess.run(["cc", "-O2", "-o", loop, os.path.join(ROOT, "scripts/bench/spawn_loop.c")],
                   check=True)
    # One output file per tracer: replacing a file another tracer wrote
    # moments before can wait for that file's writeback (on ext4, a rename
    # over an existing file starts it), which is not the new run's cost.
    trace = os.path.join(tmp, "trace.json")
    base_trace = os.path.join(tmp, "trace-baseline.json")
    # The floor any LD_PRELOAD agent pays: the loader mapping one more object.
    empty = os.path.join(tmp, "libempty.so")
    with open(empty + ".c", "w") as f:
        f.write("int forktrace_bench_empty;\n")
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", empty, empty + ".c"], check=True)
    tracers = {
        "untraced": [],
        "empty LD_PRELOAD": ["env", "LD_PRELOAD=" + empty],
        "forktrace": [ft, "run", "-q", "-o", trace, "--"],
    }
    if a.baseline:
        tracers["baseline"] = [os.path.join(os.path.abspath(a.baseline), "bin", "forktrace"),
                               "run", "-q", "-o", base_trace, "--"]
    if not a.no_strace and shutil.which("strace"):
        tracers["strace -f"] = ["strace", "-f", "-qq", "-o", "/dev/null"]

    workloads = []
    only = a.only.split(",")
    if "fork" in only:
        workloads.append(("fork+exec /bin/true x%d" % a.children, [loop, str(a.children), "fork"], None, None))
    if "spawn" in only:
        workloads.append(("posix_spawn /bin/true x%d" % a.children, [loop, str(a.children), "spawn"], None, None))
    if "make" in only:
        d = make_tree(a.files)
        clean = lambda d=d: subprocess.run(["make", "-s", "clean"], cwd=d, check=True)
        workloads.append(("make -j2, %d tiny C files" % a.files, ["make", "-s", "-j2"], d, clean))

    print("machine: %s, %d cores; %d interleaved rounds in shuffled order (seed %d), "
          "median wall time" % (os.uname().release, os.cpu_count(), a.rounds, seed))
    for name, cmd, cwd, before in workloads:
        times = {t: [] for t in tracers}
        loops = {t: [] for t in tracers}
        timed(cmd, cwd, before)  # warm the page cache
        for _ in range(a.rounds):
            order = list(tracers)
            rng.shuffle(order)
            for t in order:
                wall, loop_wall = timed(tracers[t] + cmd, cwd, before)
                times[t].append(wall)
                loops[t].append(loop_wall)
        base = statistics.median(times["untraced"])
        row = [name]
        for t in tracers:
            m = statistics.median(times[t])
            row.append("%s %.3fs (%.2fx)" % (t, m, m / base))
        print(" | ".join(row), flush=True)
        # Each round's ratio to the untraced run of the same round: the
        # machine's slow drifts cancel out; the quartiles show the spread,
        # the bootstrap interval how well the median is known.
        for t in list(tracers)[1:]:
            print("  %-16s whole run  %s" %
                  (t, ratio_summary(times[t], times["untraced"], boot_rng)), flush=True)
            if None not in loops[t] and None not in loops["untraced"]:
                print("  %-16s loop alone %s" %
                      ("", ratio_summary(loops[t], loops["untraced"], boot_rng)), flush=True)
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
