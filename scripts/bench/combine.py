#!/usr/bin/python3
"""forktrace combine's benchmark: throughput and peak memory.

Generates the inputs by replicating the real VizTracer 1.1.1 per-process
files (../shared/data/viztracer/v1.1.1_cli_pid_suffix_8proc, decompressed)
with new pids until they add up to --size, then, in one run and in
interleaved rounds:

  cat FILES > OUT                       (the speed of the disk and page cache)
  forktrace combine FILES -o OUT.json   (plain JSON out)
  forktrace combine FILES -o OUT.json.gz --level 1   (with --gzip)

and prints for each the median wall time, MB/s of input, events/s and
the peak RSS of the command (/usr/bin/time -f %M). The inputs are read once before timing, so every
run reads them from the page cache; each run starts after a sync, so that
the writeback of the previous run's output does not slow it down, a
first round is run untimed, and the order of the commands turns each
round.

With --baseline DIR, the forktrace of another build (e.g. one of the
commit before a change) is timed in the same rounds, for a before/after
on the same page cache and machine load. With --one-thread, each combine
is also timed with FORKTRACE_THREADS=1 (no worker thread: the writes,
compression and formatting that the pipeline gives the other cores stay
on the main thread), for the gain of the second core.

Usage: scripts/bench/combine.py [--build DIR] [--size 1G] [--rounds 3]
                                [--dir DIR] [--gzip] [--keep] [--baseline DIR]
                                [--one-thread]
"""
import argparse
import glob
import gzip
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(os.path.dirname(ROOT), "shared", "data", "viztracer",
                    "v1.1.1_cli_pid_suffix_8proc")


def parse_size(s):
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([KMG]?)B?", s.upper())
    if not m:
        raise argparse.ArgumentTypeError(f"bad size {s!r}")
    return int(float(m.group(1)) * {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[m.group(2)])


def generate(outdir, size):
    """Copies of the VizTracer files, each with a new pid (and the main
    thread's tid), until size bytes. Returns (paths, events)."""
    srcs = []
    for path in sorted(glob.glob(os.path.join(DATA, "*.json.gz"))):
        text = gzip.open(path).read()
        pid = int(re.search(rb'"pid":(\d+)', text).group(1))
        events = text.count(b'"ph":')
        srcs.append((text, pid, events))
    paths, total, events, k = [], 0, 0, 0
    while total < size:
        text, pid, n = srcs[k % len(srcs)]
        new = 100000 + k
        out = text.replace(b'"pid":%d,' % pid, b'"pid":%d,' % new)
        out = out.replace(b'"tid":%d,' % pid, b'"tid":%d,' % new)
        path = os.path.join(outdir, f"result_{new}.json")
        with open(path, "wb") as f:
            f.write(out)
        paths.append(path)
        total += len(out)
        events += n
        k += 1
    return paths, total, events


def timed(argv, stdout_path, env=None):
    """Runs argv (stdout to stdout_path); returns (seconds, peak RSS KiB,
    user seconds, system seconds). The peak RSS comes from /usr/bin/time
    -f %M: a child of python would report python's own RSS (Linux keeps the
    high-water mark across exec)."""
    with open(stdout_path, "wb") as f:
        t0 = time.perf_counter()
        r = subprocess.run(["/usr/bin/time", "-f", "%M %U %S"] + argv, stdout=f,
                           stderr=subprocess.PIPE, env=env)
        dt = time.perf_counter() - t0
    if r.returncode != 0:
        sys.exit(f"failed: {' '.join(argv[:4])} ...: {r.stderr.decode()[-2000:]}")
    rss, user, system = r.stderr.split()[-3:]
    return dt, int(rss), float(user), float(system)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--size", type=parse_size, default=parse_size("1G"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dir", help="where to generate the inputs (default: a temporary dir)")
    ap.add_argument("--gzip", action="store_true", help="also time .json.gz output (--level 1)")
    ap.add_argument("--keep", action="store_true", help="keep the generated inputs")
    ap.add_argument("--baseline", help="also time the forktrace of this build dir")
    ap.add_argument("--one-thread", action="store_true",
                    help="also time each combine with FORKTRACE_THREADS=1")
    a = ap.parse_args()
    ft = os.path.join(a.build, "bin", "forktrace")
    if not os.access(ft, os.X_OK):
        sys.exit(f"{ft} not found: build first (scripts/build {a.build})")
    work = a.dir or tempfile.mkdtemp(prefix="ft-bench-combine-")
    indir = os.path.join(work, "in")
    os.makedirs(indir, exist_ok=True)
    try:
        paths, total, events = generate(indir, a.size)
        for p in paths:  # into the page cache
            with open(p, "rb") as f:
                while f.read(1 << 24):
                    pass
        out = os.path.join(work, "out")
        cases = [("cat", ["cat"] + paths, out + ".cat"),
                 ("combine .json", [ft, "combine", "-q", "-o", out + ".json"] + paths, os.devnull)]
        if a.baseline:
            base = os.path.join(a.baseline, "bin", "forktrace")
            cases.append(("combine .json baseline", [base, "combine", "-q", "-o", out + ".json"]
                          + paths, os.devnull))
        if a.gzip:
            cases.append(("combine .json.gz -l1", [ft, "combine", "-q", "--level", "1", "-o",
                                                   out + ".json.gz"] + paths, os.devnull))
        envs = {name: None for name, _, _ in cases}
        if a.one_thread:
            one = dict(os.environ, FORKTRACE_THREADS="1")
            for name, argv, so in list(cases):
                if name.startswith("combine") and not name.endswith("baseline"):
                    cases.append((name + " 1 thread", argv, so))
                    envs[name + " 1 thread"] = one
        res = {name: [] for name, _, _ in cases}
        # One untimed round first: on a VM the first writes into memory
        # the guest has not touched yet cost host page faults, which
        # would land on whichever command runs first.
        # The order turns each round: on this VM the command that runs
        # right after another one's output was deleted often pays more
        # system time (page cache churn), whichever it is.
        for rnd in range(a.rounds + 1):
            for name, argv, so in cases[rnd % len(cases):] + cases[:rnd % len(cases)]:
                # Each run starts with no dirty pages of the previous one:
                # otherwise its writeback throttles whichever comes next.
                os.sync()
                t = timed(argv, so, envs.get(name))
                if rnd > 0:
                    res[name].append(t)
                for p in glob.glob(out + "*"):
                    os.unlink(p)
        print(f"input: {len(paths)} files, {total / 1e6:.0f} MB, {events} events "
              f"(VizTracer 1.1.1 files replicated with new pids); {a.rounds} rounds, medians")
        print(f"{'command':32} {'seconds':>8} {'MB/s':>8} {'Mevents/s':>10} {'peak RSS MiB':>13}"
              f" {'user s':>7} {'sys s':>7}")
        cat_t = statistics.median(x[0] for x in res["cat"])
        for name, _, _ in cases:
            t = statistics.median(x[0] for x in res[name])
            rss = max(x[1] for x in res[name])
            user = statistics.median(x[2] for x in res[name])
            system = statistics.median(x[3] for x in res[name])
            print(f"{name:32} {t:8.3f} {total / t / 1e6:8.0f} {events / t / 1e6:10.2f} "
                  f"{rss / 1024:13.1f} {user:7.2f} {system:7.2f}")
        for name, _, _ in cases:
            if name.startswith("combine .json") and not name.startswith("combine .json.gz"):
                t = statistics.median(x[0] for x in res[name])
                print(f"{name} / cat speed: {cat_t / t:.2f}")
    finally:
        if not a.keep and not a.dir:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
