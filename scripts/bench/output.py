#!/usr/bin/env python3
"""forktrace's output benchmark: how fast `forktrace run` writes the trace
of a function-heavy program in each format, against uftrace's Chrome export
of the same program.

Builds scripts/bench/calls.c with -finstrument-functions (and with -pg for
uftrace) and runs, in interleaved rounds whose order turns each round:

  forktrace run -o t.json    -- calls fib 1     (22,700,000 calls)
  forktrace run -o t.json.gz -- calls fib 1
  forktrace run -o t.h5      -- calls fib 1
  uftrace record -d DIR calls_pg fib 1; uftrace dump -d DIR --chrome > u.json

for this build and, with --baseline DIR, another build in the same rounds.
Each trace is deleted once measured (the JSON is 2.3 GB; --keep keeps the
last of each in the temporary directory instead).

The write time is the time from the program's end to the trace written:
the whole command's wall time minus the program's own run (calls prints
its workload's time, ns=). It includes forktrace's start, the agent's
flush at exit and the program's exec (a few ms). Peak RSS is the
ru_maxrss that wait4 gives for the forktrace command (what GNU time's %M
shows): the larger of the collector's own peak and that of the traced
program (the agent's buffers; printed apart as "program RSS").

Events are counted once per build and format, on the first round: in the
JSON and the .json.gz by a streaming count of the traceEvents lines (one
event a line), in the .h5 with h5py (rows of every events/<pid> group), in
uftrace's Chrome JSON by its lines with a "ph" (B and E: two events a call).
Every forktrace trace must hold exactly one function slice per call, and
its summary must say 0 lost.

The table gives medians over the rounds: events/s (events / write time),
MB/s of the output, MB/s of JSON-equivalent bytes (the size of the same
build's .json over this format's write time), size, peak RSS, and the
median of the per-round ratios of the write times, baseline / this (the
speed-up; 1.00 is no change). For uftrace: the record's time after the
program, and the dump's, whose events/s is its Chrome export's speed.

Then the gzip ratio check: this build's .json.gz, decompressed, is
compressed again with `gzip -6` and `libdeflate-gzip -6`, and the three
sizes are printed.

Usage: scripts/bench/output.py [--build DIR] [--baseline DIR] [--rounds N]
                               [--only json,json.gz,h5,uftrace]
                               [--units N] [--tmp DIR] [--keep]
                               [--no-gzip-check]
  --units N   calls fib 1 N: N units of 5,675,000 calls (default 4:
              22,700,000); 1 is a quick check (570 MB of JSON)
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import LINE_RE, ROOT, UNIT_CALLS, build  # noqa: E402

FORMATS = ("json", "json.gz", "h5")
SUMMARY_RE = re.compile(r"(\d+) processes, (\d+) events, (\d+) lost")


def timed(cmd, stdout=None, env=None):
    """Runs cmd (its stdout to the file stdout, or kept); returns (wall s,
    ru_maxrss in KiB, stdout text, stderr text). Exits on failure."""
    with tempfile.TemporaryFile() as o, tempfile.TemporaryFile() as e:
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=stdout or o, stderr=e, env=env)
        # wait4 rather than Popen.wait: the rusage comes with the status.
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
        o.seek(0)
        e.seek(0)
        out = o.read().decode(errors="replace")
        err = e.read().decode(errors="replace")
    if p.returncode != 0:
        sys.exit("benchmark command failed (%d): %s\n%s%s" %
                 (p.returncode, " ".join(cmd), out[-2000:], err[-2000:]))
    return wall, ru.ru_maxrss, out, err


def program_ns(out, cmd, want):
    m = LINE_RE.search(out)
    if not m or int(m.group(1)) != want:
        sys.exit("%s: the program did not print calls=%d:\n%s" % (" ".join(cmd), want, out))
    return int(m.group(2))


def json_lines(path, pattern):
    """Lines holding pattern in a JSON or gzip JSON file, streamed (grep)."""
    cat = "zcat" if path.endswith(".gz") else "cat"
    p = subprocess.run("%s '%s' | grep -c -F -- '%s'" % (cat, path, pattern), shell=True,
                       stdout=subprocess.PIPE, check=False)
    return int(p.stdout.decode().strip() or 0)


def count_json(path):
    """(events, function slices) of a forktrace JSON trace: its writer puts
    one event on a line, each with a "ph"; the metadata has none."""
    return json_lines(path, '"ph":"'), json_lines(path, '"cat":"function"')


def count_h5(path):
    """(events, function slices) of a forktrace .h5, read with h5py."""
    import h5py
    import numpy as np
    events = functions = 0
    with h5py.File(path, "r") as f:
        meta = f["metadata"]
        strings = meta["strings"].asstr()[:]
        fn = [i for i, s in enumerate(strings) if s == "function"]
        for pid in meta["events"]:
            g = meta["events"][pid]
            events += g["ts_ns"].shape[0]
            if fn:
                functions += int(np.count_nonzero(g["cat_id"][:] == fn[0]))
    return events, functions


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--baseline", default=None,
                    help="the build directory of a forktrace to compare with, in the same rounds")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", default="json,json.gz,h5,uftrace")
    ap.add_argument("--units", type=int, default=4,
                    help="calls fib 1 UNITS: UNITS x 5,675,000 calls (default 4)")
    ap.add_argument("--tmp", default=None, help="where traces go (default: a new temp dir)")
    ap.add_argument("--keep", action="store_true",
                    help="keep the last trace of each kind (and the temp dir)")
    ap.add_argument("--no-gzip-check", action="store_true")
    a = ap.parse_args()

    only = a.only.split(",")
    unknown = [x for x in only if x not in FORMATS + ("uftrace",)]
    if unknown:
        sys.exit("--only: unknown %s (json, json.gz, h5, uftrace)" % ",".join(unknown))
    calls = a.units * UNIT_CALLS
    tmp = tempfile.mkdtemp(prefix="ft-bench-out-", dir=a.tmp)
    bins = build(tmp)
    args = ["fib", "1"] if a.units == 4 else ["fib", "1", str(a.units)]

    builds = {"this": os.path.join(os.path.abspath(a.build), "bin", "forktrace")}
    if a.baseline:
        builds["baseline"] = os.path.join(os.path.abspath(a.baseline), "bin", "forktrace")
    for b in builds.values():
        if not os.access(b, os.X_OK):
            sys.exit("%s is not executable" % b)
    uftrace = shutil.which("uftrace") if "uftrace" in only else None
    if "uftrace" in only and not uftrace:
        print("uftrace not found (FT_WITH_BENCH=1 scripts/setup-deps): left out")

    # One entry per kind of run: (build, format) or ("uftrace", "json").
    kinds = [(b, f) for f in FORMATS if f in only for b in builds]
    if uftrace:
        kinds.append(("uftrace", "json"))
    # Per kind, lists over the rounds.
    res = {k: {"write": [], "prog": [], "rss": [], "prss": [], "size": [], "dump": [],
               "dump_rss": []} for k in kinds}
    counts = {}

    def out_path(k):
        return os.path.join(tmp, "%s.%s" % (k[0], k[1]))

    def remove(path):
        if os.path.isdir(path):
            shutil.rmtree(path, ignore_errors=True)
        elif os.path.exists(path):
            os.unlink(path)

    load0 = os.getloadavg()
    print("machine: %s, %d cores, load %.2f %.2f %.2f; calls fib 1%s: %d calls; "
          "%d interleaved rounds (order turning), medians" %
          (os.uname().release, os.cpu_count(), *load0,
           "" if a.units == 4 else " " + str(a.units), calls, a.rounds), flush=True)
    timed([bins["inst"]] + args)  # warm up
    for r in range(a.rounds):
        order = kinds[r % len(kinds):] + kinds[:r % len(kinds)]
        for k in order:
            who, fmt = k
            path = out_path(k)
            if who == "uftrace":
                udir = os.path.join(tmp, "uftrace.data")
                remove(udir)
                cmd = [uftrace, "record", "-d", udir, bins["pg"]] + args
                wall, rss, out, err = timed(cmd)
                ns = program_ns(out, cmd, calls)
                with open(path, "wb") as f:
                    dcmd = [uftrace, "dump", "-d", udir, "--chrome"]
                    dwall, drss, _, _ = timed(dcmd, stdout=f)
                res[k]["dump"].append(dwall)
                res[k]["dump_rss"].append(drss)
                res[k]["prss"].append(0)
                if k not in counts:
                    counts[k] = (json_lines(path, '"ph":"'), None)
                res[k]["size"].append(os.path.getsize(path))
                remove(udir)
            else:
                remove(path)
                cmd = [builds[who], "run", "-o", path, "--", bins["inst"]] + args
                wall, rss, out, err = timed(cmd)
                ns = program_ns(out, cmd, calls)
                m = SUMMARY_RE.search(err)
                if not m or m.group(3) != "0":
                    sys.exit("%s lost events (or no summary):\n%s" % (" ".join(cmd), err[-2000:]))
                if k not in counts:
                    counts[k] = count_h5(path) if fmt == "h5" else count_json(path)
                    if counts[k][1] != calls:
                        sys.exit("%s: %d function slices, not %d" % (path, counts[k][1], calls))
                res[k]["size"].append(os.path.getsize(path))
                pm = re.search(r"maxrss_kb=(\d+)", out)
                res[k]["prss"].append(int(pm.group(1)) if pm else 0)
            res[k]["write"].append(wall - ns / 1e9)
            res[k]["prog"].append(ns / 1e9)
            res[k]["rss"].append(rss)
            if not (a.keep and r == a.rounds - 1):
                if not (k == ("this", "json.gz") and r == a.rounds - 1 and not a.no_gzip_check):
                    remove(path)
        print("  round %d: %s" % (r + 1, "; ".join(
            "%s .%s %.2f s" % (k[0], k[1], res[k]["write"][-1]) for k in order)), flush=True)

    med = statistics.median
    print()
    print("| output | build | events | program s | write s | events/s | MB/s out | "
          "MB/s JSON-eq | size MB | peak RSS MB | speed-up vs baseline |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for k in kinds:
        who, fmt = k
        d = res[k]
        events = counts[k][0]
        jk = (who, "json")
        json_size = med(res[jk]["size"]) if jk in res else None
        if who == "uftrace":
            write = med(d["dump"])
            label = "uftrace dump --chrome"
            rec = med(d["write"])
        else:
            write = med(d["write"])
            label = "forktrace -o ." + fmt
        size = med(d["size"])
        ratio = ""
        if who == "this" and "baseline" in builds:
            bk = ("baseline", fmt)
            ratio = "%.2fx" % med(b / t for b, t in zip(res[bk]["write"], d["write"]))
        print("| %s | %s | {:,} | %.2f | %.2f | %.2f M | %.0f | %s | %.1f | %.0f | %s |".format(events) % (
            label, who, med(d["prog"]), write, events / write / 1e6, size / 1e6 / write,
            "%.0f" % (json_size / 1e6 / write) if json_size else "-", size / 1e6,
            med(d["rss"] if who != "uftrace" else d["dump_rss"]) / 1024, ratio))
        if who == "uftrace":
            print("| uftrace record (after the program) | uftrace | {:,} calls | %.2f | %.2f | "
                  "| | | | %.0f | |".format(calls) % (med(d["prog"]), rec, med(d["rss"]) / 1024))
    print()
    prss = [x for k in kinds for x in res[k]["prss"] if x]
    if prss:
        print("program RSS (the traced calls, in the peak RSS above): median %.0f MB" %
              (med(prss) / 1024))
    print("rounds, write s: " + "; ".join(
        "%s .%s %s" % (k[0], k[1], ",".join("%.2f" % x for x in res[k]["write"])) for k in kinds))
    print("load average at the end: %.2f %.2f %.2f" % os.getloadavg(), flush=True)

    gz = out_path(("this", "json.gz"))
    if not a.no_gzip_check and os.path.exists(gz):
        plain = os.path.join(tmp, "gzcheck.json")
        subprocess.run("zcat '%s' > '%s'" % (gz, plain), shell=True, check=True)
        sizes = {}
        for name, tool in (("gzip -6", "gzip"), ("libdeflate-gzip -6", "libdeflate-gzip")):
            if not shutil.which(tool):
                print("%s not found: left out" % tool)
                continue
            t0 = time.perf_counter()
            p = subprocess.run("%s -6 -c '%s' | wc -c" % (tool, plain), shell=True,
                               stdout=subprocess.PIPE, check=True)
            sizes[name] = (int(p.stdout.decode()), time.perf_counter() - t0)
        ours = os.path.getsize(gz)
        print("gzip ratio check (the same JSON, %.0f MB): ours %.2f MB (ratio %.2f)" %
              (os.path.getsize(plain) / 1e6, ours / 1e6, os.path.getsize(plain) / ours))
        for name, (n, s) in sizes.items():
            print("  %s: %.2f MB in %.1f s (ratio %.2f); ours / %s = %.3f" %
                  (name, n / 1e6, s, os.path.getsize(plain) / n, name, ours / n))
        remove(plain)
        if not a.keep:
            remove(gz)
    if a.keep:
        print("traces kept in %s" % tmp)
    else:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
