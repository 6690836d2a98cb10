#!/usr/bin/env python3
"""forktrace's in-process events benchmark: what recording a function
call or a region costs the traced program, against uftrace.

Builds scripts/bench/calls.c with -finstrument-functions (and with -pg for
uftrace), then runs, in interleaved rounds whose order turns each round:

  fib 1       22,700,000 instrumented calls on one thread
  fib 4       the same 22,700,000 calls split over 4 threads
  region N    N ft_region_begin/ft_region_end pairs (forktrace.h)

each untraced (the same binary without an agent: glibc's no-op
__cyg_profile hooks, or glibc's mcount with profiling off for -pg), under
`forktrace run -o TRACE --`, and under `uftrace record -d DIR`. The time
compared is the workload's own, measured inside the program around the
workload (so a tracer's start-up, and forktrace's writing of the trace after
the program has ended, are not in it); the whole command's wall time is
reported next to it, and so is the program's CPU time over the workload
(user + system, all threads: less sensitive to other load on the machine,
and well below the program's time x threads when it waited), and the
tracer's CPU time over the same span (the program's parent, from /proc,
10 ms resolution): what it costs to take the data while the program runs. Per call (enter + exit): (traced - untraced) / calls,
medians of the rounds.

Every forktrace run is checked: its summary must say "0 lost", and the
first run of each workload's trace must hold exactly one slice per call
(or region).

With --baseline DIR, the forktrace of another build (say, of the commit
before a change) runs in the same rounds, and each workload also prints
the median of the per-round ratios of the two forktraces' program times
and wall times (this build / the baseline).

Usage: scripts/bench/events.py [--build DIR] [--rounds N] [--regions N]
                               [--only fib1,fib4,region] [--no-uftrace]
                               [--output json|json.gz|h5] [--formats]
                               [--baseline DIR]
"""
import argparse
import os
import re
import shutil
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import CALLS, ROOT, build, count_slices, run  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--regions", type=int, default=5000000)
    ap.add_argument("--only", default="fib1,fib4,region")
    ap.add_argument("--no-uftrace", action="store_true")
    ap.add_argument("--output", default="json", choices=["json", "json.gz", "h5"],
                    help="forktrace's trace format in the rounds")
    ap.add_argument("--formats", action="store_true",
                    help="afterwards, one fib 1 run per output format: wall and size")
    ap.add_argument("--tmp", default=None, help="where traces go (default: a new temp dir)")
    ap.add_argument("--baseline", default=None,
                    help="the build directory of a forktrace to compare with, in the same rounds")
    a = ap.parse_args()

    ft = os.path.join(os.path.abspath(a.build), "bin", "forktrace")
    tmp = tempfile.mkdtemp(prefix="ft-bench-ev-", dir=a.tmp)
    bins = build(tmp)
    trace = os.path.join(tmp, "trace." + a.output)
    udir = os.path.join(tmp, "uftrace.data")
    uftrace = None if a.no_uftrace else shutil.which("uftrace")
    if not a.no_uftrace and not uftrace:
        print("uftrace not found (FT_WITH_BENCH=1 scripts/setup-deps): left out")

    def cleanup():
        for p in (trace, udir):
            if os.path.isdir(p):
                shutil.rmtree(p, ignore_errors=True)
            elif os.path.exists(p):
                os.unlink(p)

    # (name, argv tail, count, slice category)
    workloads = []
    only = a.only.split(",")
    if "fib1" in only:
        workloads.append(("fib, 1 thread", ["fib", "1"], CALLS, "function"))
    if "fib4" in only:
        workloads.append(("fib, 4 threads", ["fib", "4"], CALLS, "function"))
    if "region" in only:
        workloads.append(("region pairs", ["region", str(a.regions)], a.regions, "region"))

    # tracer: (command prefix, binary, baseline tracer)
    tracers = {
        "untraced": ([], "inst", None),
        "forktrace": ([ft, "run", "-o", trace, "--"], "inst", "untraced"),
    }
    if a.baseline:
        base_ft = os.path.join(os.path.abspath(a.baseline), "bin", "forktrace")
        tracers["baseline"] = ([base_ft, "run", "-o", trace, "--"], "inst", "untraced")
    if uftrace:
        tracers["uftrace"] = ([uftrace, "record", "-d", udir], "inst", "untraced")
        tracers["untraced -pg"] = ([], "pg", None)
        tracers["uftrace -pg"] = ([uftrace, "record", "-d", udir], "pg", "untraced -pg")

    print("machine: %s, %d cores; %d interleaved rounds (order turning), medians; "
          "forktrace output .%s" % (os.uname().release, os.cpu_count(), a.rounds, a.output))
    for name, args, count, cat in workloads:
        names = [t for t in tracers
                 if cat == "function" or tracers[t][1] == "inst" and "uftrace" not in t]
        prog = {t: [] for t in names}
        cpu = {t: [] for t in names}
        tcpu = {t: [] for t in names}
        wall = {t: [] for t in names}
        checked = False
        run([bins["inst"]] + args)  # warm up
        for r in range(a.rounds):
            order = names[r % len(names):] + names[:r % len(names)]
            for t in order:
                prefix, b, _ = tracers[t]
                cleanup()
                ns, n, w, err, c, pc = run(prefix + [bins[b]] + args)
                if n != count:
                    sys.exit("%s: the program did %d, not %d" % (t, n, count))
                prog[t].append(ns)
                cpu[t].append(c)
                tcpu[t].append(pc)
                wall[t].append(w)
                if t in ("forktrace", "baseline"):
                    m = re.search(r"(\d+) processes, (\d+) events, (\d+) lost", err)
                    if not m or m.group(3) != "0":
                        sys.exit("forktrace lost events (or no summary):\n" + err[-2000:])
                    if t == "forktrace" and not checked and a.output != "h5":
                        got = count_slices(trace, cat)
                        if got != count:
                            sys.exit("forktrace's trace holds %d %s slices, not %d" %
                                     (got, cat, count))
                        size = os.path.getsize(trace)
                        print("  %s: forktrace trace holds %d %s slices (= %d), %d lost, "
                              "%.0f MB" % (name, got, cat, count, int(m.group(3)), size / 1e6))
                        checked = True
        cleanup()
        print("%s (%d %s):" % (name, count, "calls" if cat == "function" else "pairs"))
        for t in names:
            mp = statistics.median(prog[t]) / 1e9
            mw = statistics.median(wall[t])
            mc = statistics.median(cpu[t]) / 1e9
            base = tracers[t][2]
            line = "  %-13s program %.3f s (cpu %.3f s), wall %.3f s" % (t, mp, mc, mw)
            if base:
                mb = statistics.median(prog[base]) / 1e9
                cb = statistics.median(cpu[base]) / 1e9
                line += ", +%.1f ns per %s (cpu: +%.1f ns; program: %.2fx)" % (
                    (mp - mb) * 1e9 / count, "call" if cat == "function" else "pair",
                    (mc - cb) * 1e9 / count, mp / mb)
                line += "; tracer cpu %.1f ns" % (statistics.median(tcpu[t]) / count)
            else:
                line += " (%.2f ns per %s)" % (mp * 1e9 / count,
                                                "call" if cat == "function" else "pair")
            print(line)
        if "baseline" in names:
            pr = statistics.median(x / y for x, y in zip(prog["forktrace"], prog["baseline"]))
            wr = statistics.median(x / y for x, y in zip(wall["forktrace"], wall["baseline"]))
            print("  forktrace / baseline, median of per-round ratios: program %.3fx, "
                  "wall %.3fx" % (pr, wr))
        print("  rounds, program ms: " + "; ".join(
            "%s %s" % (t, ",".join("%.0f" % (x / 1e6) for x in prog[t])) for t in names),
            flush=True)

    if a.formats:
        print("forktrace output formats (fib 1, one run each):")
        for fmt in ("json", "json.gz", "h5"):
            out = os.path.join(tmp, "fmt." + fmt)
            ns, _, w, err, _, _ = run([ft, "run", "-o", out, "--", bins["inst"], "fib", "1"])
            m = re.search(r"(\d+) lost", err)
            print("  .%-8s wall %.2f s (program %.3f s), %.0f MB, %s lost" %
                  (fmt, w, ns / 1e9, os.path.getsize(out) / 1e6, m.group(1) if m else "?"),
                  flush=True)
            os.unlink(out)
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
