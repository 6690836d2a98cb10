#!/usr/bin/env python3
"""forktrace's multi-host benchmark (docs/MULTIHOST.md), on the simulated
cluster of tests/cluster/ (root; scripts/setup-deps installs what it needs).

  remote   a fork+exec loop (scripts/bench/spawn_loop.c, N children of
           /bin/true) on node1, started from the head with `ssh node1 LOOP`:
           untraced, and under `forktrace run -- ssh node1 LOOP` (the node
           collector in front of the loop); the same loop on the head,
           untraced and traced, in the same interleaved rounds. The time
           compared is the loop's own (it prints it); ratio = traced /
           untraced, median of the per-round ratios with a 90% bootstrap
           interval.
  clock    `forktrace run -- mpirun -np 4 --host node1:2,node2:2 mpi_marks`
           (each rank makes an instant right after each of its MPI_Barriers):
           per round, the error bound the trace records per node
           (otherData.forktrace.hosts[].err_ns) and the measured spread of
           each barrier's four marks on the trace's clock (max - min): the
           best barrier of the run (the ranks left it together: what is left
           is clock error plus the barrier's own exit skew) and the median
           one (ranks that waited for a CPU after the barrier).

The head's ingest of many node collectors at once is scripts/bench/ingest.py.

Usage: scripts/bench/multihost.py [--build DIR] [--rounds N] [--children N]
                                  [--only remote,clock]
"""
import argparse
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "cluster"))


def ratio_summary(r, rng):
    """Median of the ratios r, and a 90% bootstrap interval of it."""
    r = sorted(r)
    if len(r) < 2:
        return "%.3fx" % r[0]
    boot = sorted(statistics.median(rng.choices(r, k=len(r))) for _ in range(2000))
    return "%.3fx [90%% CI %.3f-%.3f]" % (statistics.median(r), boot[100], boot[1899])


def loop_seconds(proc, what):
    err = proc.stderr.decode(errors="replace")
    m = re.search(r"spawn_loop: \d+ children in (\d+) ns", err)
    if proc.returncode != 0 or not m:
        sys.exit("%s failed (%d):\n%s" % (what, proc.returncode, err[-3000:]))
    return int(m.group(1)) / 1e9


def bench_remote(c, ft, work, a, rng):
    loop = os.path.join(work, "spawn_loop")
    subprocess.run(["cc", "-O2", "-o", loop, os.path.join(ROOT, "scripts/bench/spawn_loop.c")],
                   check=True)
    trace = os.path.join(work, "remote.json")
    cmds = {
        "remote untraced": ["ssh", "node1", loop, str(a.children), "fork"],
        "remote traced": [ft, "run", "-q", "-o", trace, "--", "ssh", "node1", loop,
                          str(a.children), "fork"],
        "local untraced": [loop, str(a.children), "fork"],
        "local traced": [ft, "run", "-q", "-o", trace, "--", loop, str(a.children), "fork"],
    }
    t = {k: [] for k in cmds}
    for _ in range(a.rounds):
        order = list(cmds)
        rng.shuffle(order)
        for k in order:
            t[k].append(loop_seconds(c.run_on("head", cmds[k], timeout=300), k))
    # The traced remote loop really ran behind a node collector: its
    # children are in the trace, on node1.
    c.run_on("head", cmds["remote traced"], timeout=300)
    with open(trace) as f:
        ev = json.load(f)
    hosts = {h["name"]: h for h in ev["otherData"]["forktrace"]["hosts"]}
    if hosts.get("node1", {}).get("state") != "complete" or hosts["node1"]["processes"] < a.children:
        sys.exit("remote traced run: node1's part is not complete: %r" % hosts.get("node1"))
    per = lambda k: statistics.median(t[k]) / a.children * 1e6
    print("remote: fork+exec /bin/true x%d, %d rounds; median loop time per process:" %
          (a.children, a.rounds))
    for k in cmds:
        print("  %-16s %8.1f us" % (k, per(k)))
    print("  remote traced / untraced: %s" %
          ratio_summary([x / y for x, y in zip(t["remote traced"], t["remote untraced"])], rng))
    print("  local  traced / untraced: %s" %
          ratio_summary([x / y for x, y in zip(t["local traced"], t["local untraced"])], rng))


def bench_clock(c, ft, work, a, rng):
    prog = os.path.join(a.build, "tests", "progs", "mpi_marks")
    if not os.path.exists(prog):
        print("clock: %s not built (no MPI): left out" % prog)
        return
    trace = os.path.join(work, "mpi.json")
    errs, spreads, best = [], [], []
    for _ in range(a.rounds):
        r = c.run_on("head", [ft, "run", "-q", "-o", trace, "--", "mpirun", "--allow-run-as-root",
                              "-np", "4", "--host", "node1:2,node2:2", prog], timeout=300)
        if r.returncode != 0:
            sys.exit("mpirun under forktrace failed (%d):\n%s" %
                     (r.returncode, r.stderr.decode(errors="replace")[-3000:]))
        with open(trace) as f:
            ev = json.load(f)
        hosts = ev["otherData"]["forktrace"]["hosts"]
        nodes = [h for h in hosts if h["role"] == "node"]
        if len(nodes) != 2 or any(h["clock"] != "measured" for h in nodes):
            sys.exit("clock: expected 2 measured nodes: %r" % hosts)
        errs.append(max(h["err_ns"] for h in nodes))
        marks = {}
        for e in ev["traceEvents"]:
            if e.get("ph") == "i" and str(e.get("name", "")).startswith("barrier "):
                marks.setdefault(e["name"], []).append(e["ts"])
        if not marks or any(len(v) != 4 for v in marks.values()):
            sys.exit("clock: expected 4 marks of each barrier: %r" %
                     {k: len(v) for k, v in marks.items()})
        spread = sorted(max(v) - min(v) for v in marks.values())  # us
        best.append(spread[0])
        spreads.append(statistics.median(spread))
    print("clock: mpirun -np 4 across node1 and node2 (clock offsets %+d s and %+d s), %d runs:" %
          (c.offset("node1"), c.offset("node2"), a.rounds))
    print("  recorded error bound (worst node), median %.1f us, max %.1f us" %
          (statistics.median(errs) / 1e3, max(errs) / 1e3))
    print("  spread of one barrier's 4 marks: best barrier of a run, median %.1f us; "
          "median barrier of a run, median %.1f us, max %.1f us" %
          (statistics.median(best), statistics.median(spreads), max(spreads)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--rounds", type=int, default=11)
    ap.add_argument("--children", type=int, default=2000)
    ap.add_argument("--only", default="remote,clock")
    ap.add_argument("--seed", type=int)
    a = ap.parse_args()
    a.build = os.path.abspath(a.build)
    ft = os.path.join(a.build, "bin", "forktrace")
    seed = a.seed if a.seed is not None else random.SystemRandom().randrange(1 << 30)
    rng = random.Random(seed)
    only = a.only.split(",")
    # Outside /tmp: every host of the cluster sees it at the same path.
    work = tempfile.mkdtemp(prefix="ft-bench-mh-", dir=a.build)
    print("machine: %s, %d cores; seed %d" % (os.uname().release, os.cpu_count(), seed))
    try:
        import cluster as cl
        with cl.Cluster(2, os.path.join(work, "cluster")) as c:
            if "remote" in only:
                bench_remote(c, ft, work, a, rng)
            if "clock" in only:
                bench_clock(c, ft, work, a, rng)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
