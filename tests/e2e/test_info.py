#!/usr/bin/env python3
"""End-to-end tests of `forktrace info`'s summary, --json, --critical-path
and --tree (docs/INSIGHT.md, "forktrace info"): on traces written by hand
whose answers are known (a build: configure probes that fail by design,
compile jobs with known CPU time and peak memory, a killed process, MPI
ranks), on foreign traces (what is not known is said), at the scale of a
big build (40,000 processes), and on real runs, each line checked against
the trace file."""

import gzip
import json
import os
import random
import re
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ftcheck import Skip, check, forktrace_bin, main, prog, test  # noqa: E402
from test_combine import data  # noqa: E402

S = 1_000_000_000
MS = 1_000_000
# The summary fits a screen whatever the trace.
MAX_LINES = 30


def human(ns):
    """say_duration (collector/say.c) in Python: the test's own reading of
    "times for people"."""
    if ns < 1000:
        return f"{ns} ns"
    for scale, unit, limit in ((1e3, "us", 999.5), (1e6, "ms", 999.5), (1e9, "s", 59.95)):
        v = ns / scale
        if v < limit:
            prec = 0 if v >= 99.95 else 1 if v >= 9.995 else 2
            t = f"{v:.{prec}f}"
            if prec:
                t = t.rstrip("0").rstrip(".")
            return f"{t} {unit}"
    s = (ns + 500_000_000) // S
    if s < 3600:
        return f"{s // 60} min {s % 60} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"


class Fixture:
    """A trace written event by event, as `forktrace run` writes one."""

    def __init__(self, command=("make", "-j2"), exit_status=0):
        self.events = []
        self.procs = {}
        self.command = list(command)
        self.exit_status = exit_status

    def proc(self, pid, parent, name, start, end, exit=0, interp=None, ru=None, rank=None,
             launcher=None, signal=None):
        if signal is not None:
            ex = {"kind": "signal", "signal": signal[0], "name": signal[1]}
        elif exit is None:
            ex = {"kind": "unknown"}
        else:
            ex = {"kind": "code", "code": exit}
        args = {"pid": pid, "ppid": parent, "parent": parent, "name": name, "start_ns": start,
                "end_ns": end, "exit": ex, "instrumented": True, "images": 1, "lost_events": 0}
        if interp:
            args["interpreter"] = interp
        if ru:
            user, sys_, rss = ru
            args["rusage"] = {"source": "wait", "user_ns": user, "sys_ns": sys_,
                              "maxrss_kb": rss, "minflt": 1, "majflt": 0, "nvcsw": 1,
                              "nivcsw": 1, "inblock": 0, "oublock": 0}
        if rank is not None:
            args["rank"] = rank
            args["launcher"] = launcher
        label = f"{name} ({interp})" if interp else name
        self.events.append({"ph": "M", "name": "process_name", "pid": pid, "tid": pid,
                            "args": {"name": label}})
        self.events.append({"ph": "M", "name": "forktrace_process", "pid": pid, "tid": pid,
                            "args": args})
        self.events.append({"ph": "X", "cat": "process", "name": label, "pid": pid,
                            "tid": pid, "ts": start / 1000, "dur": (end - start) / 1000})
        self.procs[pid] = args
        return pid

    def doc(self):
        starts = [a["start_ns"] for a in self.procs.values()]
        ends = [a["end_ns"] for a in self.procs.values()]
        return {"traceEvents": self.events, "displayTimeUnit": "ns",
                "otherData": {"forktrace": {
                    "version": "test", "origin": "forktrace run", "host": "h",
                    "command": self.command, "start_ns": min(starts), "end_ns": max(ends),
                    "exit_status": self.exit_status, "processes": len(self.procs),
                    "lost_events": 0}}}

    def write(self, path):
        text = json.dumps(self.doc(), separators=(",", ":"))
        if path.endswith(".gz"):
            with gzip.open(path, "wt") as f:
                f.write(text)
        else:
            with open(path, "w") as f:
                f.write(text)


def build_fixture():
    """make -j2: configure (sh) with 31 gcc -> cc1 probes that exit 1 (both), 8 sh
    that exit 1 under make, 4 compile jobs (one of 1.2 GiB), a killed sleep,
    two MPI ranks."""
    f = Fixture()
    f.proc(100, -1, "make", 0, 10 * S, ru=(100 * MS, 20 * MS, 9000))
    f.proc(101, 100, "configure", 0, 3 * S, interp="sh", ru=(300 * MS, 100 * MS, 4000))
    for i in range(31):
        t = 10 * MS + i * 90 * MS
        f.proc(200 + i, 101, "gcc", t, t + 40 * MS, exit=1, ru=(2 * MS, 1 * MS, 5000))
        f.proc(300 + i, 200 + i, "cc1", t + 5 * MS, t + 35 * MS, exit=1,
               ru=(20 * MS, 5 * MS, 20000 + i))
    for i in range(8):
        t = 3 * S + i * 10 * MS
        f.proc(400 + i, 100, "sh", t, t + 5 * MS, exit=1, ru=(1 * MS, 1 * MS, 1500))
    jobs = [(500, 3 * S, 6 * S, 2900 * MS, 307200), (501, 3 * S, 5 * S, 1900 * MS, 1258291),
            (502, 6 * S, 9 * S, 2800 * MS, 204800), (503, 5 * S, 8 * S, 2700 * MS, 102400)]
    for pid, a, b, cpu, rss in jobs:
        f.proc(pid, 100, "cc1", a, b, ru=(cpu, 50 * MS, rss))
    f.proc(600, 100, "ld", 9 * S, 9900 * MS, ru=(400 * MS, 100 * MS, 512000))
    f.proc(700, 100, "sleep", 9 * S, 9500 * MS, signal=(15, "SIGTERM"))
    f.proc(800, 100, "app", 9 * S, 9800 * MS, rank=0, launcher="Open MPI",
           ru=(700 * MS, 10 * MS, 30000))
    f.proc(801, 100, "app", 9 * S, 9800 * MS, rank=1, launcher="Open MPI",
           ru=(700 * MS, 10 * MS, 30000))
    return f


def lines_of(out):
    return out.rstrip("\n").split("\n")


def line(out, label):
    found = [l for l in lines_of(out) if l.startswith(f"  {label}")]
    check(len(found) == 1, f"no single line {label!r} in:\n{out}")
    return found[0][len(label) + 2:].strip()


def per_program(procs):
    """name -> (processes, wall_ns, cpu_ns) of the records."""
    out = {}
    for a in procs.values():
        n, wall, cpu = out.get(a["name"], (0, 0, 0))
        ru = a.get("rusage")
        out[a["name"]] = (n + 1, wall + a["end_ns"] - a["start_ns"],
                          cpu + (ru["user_ns"] + ru["sys_ns"] if ru else 0))
    return out


def list_after(out, label):
    """The indented lines under the line that starts with label."""
    ls = lines_of(out)
    i = next(k for k, l in enumerate(ls) if l.startswith(f"  {label}"))
    rows = []
    for l in ls[i + 1:]:
        if not l.startswith("    "):
            break
        rows.append(l.split())
    return rows


@test
def summary(t):
    """The summary of a build written by hand: every line against what the
    fixture holds."""
    f = build_fixture()
    f.write(t.path("b.json"))
    res = t.forktrace(["info", "b.json"])
    check(res.rc == 0, f"info:\n  {res.describe()}")
    out = res.out
    check(len(lines_of(out)) <= MAX_LINES, f"{len(lines_of(out))} lines:\n{out}")
    check(line(out, "command:") == "make -j2", out)
    check(line(out, "run:") == f"10 s, {len(f.procs)} processes, 2 with a rank (0-1, Open MPI)",
          out)
    check(line(out, "exit:") == "the command succeeded (exit status 0)", out)
    # gcc exits 1 when its cc1 does: both are configure's probes. The
    # list wraps under its first item, within 80 columns.
    check("\n  non-zero:    70 processes exited non-zero: 31 cc1 (under configure),\n"
          "               31 gcc (under configure), 8 sh\n" in out, out)
    check(all(len(l) <= 80 for l in lines_of(out)[1:]), out)
    check(line(out, "killed:") == "1 by a signal: sleep (pid 700, SIGTERM)", out)
    progs = per_program(f.procs)
    by_wall = sorted(progs, key=lambda n: (-progs[n][1], n))[:4]
    rows = list_after(out, "most time:")
    check([r[0] for r in rows] == by_wall, f"most time {rows}, expected {by_wall}\n{out}")
    for r in rows:
        want = f"{human(progs[r[0]][1])} {progs[r[0]][0]}"
        check(" ".join(r[1:-1]) == want, f"{r}: expected {want}\n{out}")
    cpu = sum(p[2] for p in progs.values())
    user = sum(a["rusage"]["user_ns"] for a in f.procs.values() if "rusage" in a)
    check(line(out, "CPU time:").startswith(
        f"{human(cpu)} (user {human(user)}, system {human(cpu - user)}; "
        f"{len(f.procs) - 1} of {len(f.procs)} processes), most:"), out)
    by_cpu = sorted((n for n in progs if progs[n][2]), key=lambda n: (-progs[n][2], n))[:4]
    rows = list_after(out, "CPU time:")
    check([r[0] for r in rows] == by_cpu, f"most CPU {rows}, expected {by_cpu}\n{out}")
    check(rows[0][1:3] == human(progs[by_cpu[0]][2]).split(), f"{rows[0]}\n{out}")
    # The third (300 MiB cc1) would pass 80 columns.
    check(line(out, "peak memory:") == "1.2 GiB cc1 (pid 501), 500 MiB ld (pid 600)", out)
    check(line(out, "lost:") == "none", out)

    # --json: the same summary, its numbers whole.
    res = t.forktrace(["info", "--json", "b.json"])
    check(res.rc == 0, f"info --json:\n  {res.describe()}")
    j = json.loads(res.out)
    check(j["command"] == ["make", "-j2"] and j["exit_status"] == 0 and
          j["processes"] == len(f.procs) and j["records"] == len(f.procs) and
          j["duration_ns"] == 10 * S and j["lost_events"] == 0, f"{j}")
    check(j["exits"]["nonzero"] == 70 and j["exits"]["killed"] == 1 and
          j["exits"]["nonzero_by_program"] == [
              {"name": "cc1", "count": 31, "under": "configure"},
              {"name": "gcc", "count": 31, "under": "configure"},
              {"name": "sh", "count": 8, "under": None}] and
          j["exits"]["killed_processes"] == [
              {"pid": 700, "name": "sleep", "signal": 15, "signal_name": "SIGTERM"}],
          f"exits: {j['exits']}")
    check(j["cpu"] == {"processes": len(f.procs) - 1, "user_ns": user, "sys_ns": cpu - user},
          f"cpu: {j['cpu']}")
    check([(p["name"], p["processes"], p["wall_ns"]) for p in j["programs_by_wall"]] ==
          [(n, progs[n][0], progs[n][1])
           for n in sorted(progs, key=lambda n: (-progs[n][1], n))], f"{j['programs_by_wall']}")
    check([p["pid"] for p in j["peak_memory"]][:3] == [501, 600, 500], f"{j['peak_memory']}")
    check(j["ranks"] == {"processes": 2, "min": 0, "max": 1, "launcher": "Open MPI"},
          f"{j['ranks']}")
    # The critical path is combine's of the same file, step by step, each
    # step's share of the path and each process's total.
    comb = t.forktrace(["combine", "b.json", "-o", "c.json"])
    check(comb.rc == 0, f"combine:\n  {comb.describe()}")
    with open(t.path("c.json")) as fh:
        cp = json.load(fh)["otherData"]["forktrace"].get("critical_path")
    res = t.forktrace(["info", "--critical-path", "--json", "b.json"])
    jp = json.loads(res.out)["critical_path"]
    if cp is None:
        check(jp is None and line(out, "critical path:") == "not computed for this trace",
              f"{jp}\n{out}")
    else:
        total = cp["end_ns"] - cp["start_ns"]
        check([(st["pid"], st["start_ns"], st["end_ns"]) for st in jp["step_list"]] ==
              [(st["pid"], st["start_ns"], st["end_ns"]) for st in cp["steps"]],
              f"info's steps {jp['step_list']}\ncombine's {cp['steps']}")
        check(all(abs(st["share"] - (st["end_ns"] - st["start_ns"]) / total) < 1e-9
                  for st in jp["step_list"]), f"{jp['step_list']}")
        per = {}
        for st in cp["steps"]:
            per[st["pid"]] = per.get(st["pid"], 0) + st["end_ns"] - st["start_ns"]
        check({p["pid"]: p["total_ns"] for p in jp["processes"]} == per and
              [p["total_ns"] for p in jp["processes"]] ==
              sorted(per.values(), reverse=True), f"{jp['processes']}\n{per}")
        top = max(per, key=lambda k: (per[k], -k))
        check(line(out, "critical path:").startswith(
            f"{human(total)}, {len(cp['steps'])} step"), out)
        check(list_after(out, "critical path:")[0][-1] == f"{top})", out)
    # The same from gzip and from HDF5: only the header differs.
    f.write(t.path("b.json.gz"))
    gz = t.forktrace(["info", "b.json.gz"])
    check(gz.rc == 0 and lines_of(gz.out)[1:] == lines_of(out)[1:] and
          "(gzip)" in lines_of(gz.out)[0], f"gzip:\n{gz.out}\nplain:\n{out}")
    h5 = t.forktrace(["combine", "b.json", "-o", "b.h5"])
    check(h5.rc == 0, f"combine to HDF5:\n  {h5.describe()}")
    h5 = t.forktrace(["info", "b.h5"])
    check(h5.rc == 0 and "HDF5" in lines_of(h5.out)[0] and
          lines_of(h5.out)[1:] == lines_of(out)[1:], f"HDF5:\n{h5.out}\nJSON:\n{out}")


@test
def run_status(t):
    """The run's own status, said plainly: failed, killed, not known."""
    f = build_fixture()
    f.exit_status = 2
    f.write(t.path("fail.json"))
    res = t.forktrace(["info", "fail.json"])
    check(line(res.out, "exit:") == "the command failed (exit status 2)", res.out)
    f = Fixture(command=["sleep", "9"], exit_status=137)
    f.proc(10, -1, "sleep", 0, S, signal=(9, "SIGKILL"))
    f.write(t.path("killed.json"))
    res = t.forktrace(["info", "killed.json"])
    check(line(res.out, "exit:") ==
          "the command was killed by signal 9 (SIGKILL) (exit status 137)", res.out)
    check(line(res.out, "non-zero:") == "no process exited with a non-zero code", res.out)
    check(line(res.out, "CPU time:").startswith("not in this trace"), res.out)
    check(line(res.out, "peak memory:") == "not in this trace", res.out)


@test
def foreign(t):
    """A trace of another tool (VizTracer): no process records. The summary
    says what is not known instead of zeros."""
    f = [os.path.join(data("v1.1.1_event_kinds"), x)
         for x in sorted(os.listdir(data("v1.1.1_event_kinds"))) if x.endswith(".json.gz")][0]
    res = t.forktrace(["info", f])
    check(res.rc == 0, f"info:\n  {res.describe()}")
    out = res.out
    check("from VizTracer 1.1.1" in lines_of(out)[0], out)
    check(line(out, "exit:") == "not in this trace", out)
    check(line(out, "not known:").startswith("exits, lifetimes, CPU time, memory, critical path"),
          out)
    check(" 0 ns" not in out and "most time" not in out and "CPU time:" not in out, out)
    check(line(out, "lost:") == "not recorded by this tool", out)
    j = json.loads(t.forktrace(["info", "--json", f]).out)
    check(j["exits"] is None and j["cpu"] is None and j["critical_path"] is None and
          j["exit_status"] is None and j["programs_by_wall"] == [], f"{j}")


def write_big(path, n):
    """A build of n processes written straight as text (a Fixture's dicts
    and json.dumps took seconds): make, then n - 1 jobs of 37 programs, one
    in 50 failing, every fourth a child of make and the others of that
    one; pids in no order (a combine's, a wrapped pid counter). Returns
    the number of non-zero exits."""
    rnd = random.Random(1)
    pids = rnd.sample(range(1000, 10 * n), n)
    make = pids[0]
    out = ['{"traceEvents":[']
    nonzero = 0

    def proc(pid, parent, name, a, b, code, user, sys_, rss):
        out.append(
            f'{{"ph":"M","name":"process_name","pid":{pid},"tid":{pid},"args":{{"name":"{name}"}}}},'
            f'{{"ph":"M","name":"forktrace_process","pid":{pid},"tid":{pid},"args":{{"pid":{pid},'
            f'"ppid":{parent},"parent":{parent},"name":"{name}","start_ns":{a},"end_ns":{b},'
            f'"exit":{{"kind":"code","code":{code}}},"instrumented":true,"images":1,'
            f'"lost_events":0,"rusage":{{"source":"wait","user_ns":{user},"sys_ns":{sys_},'
            f'"maxrss_kb":{rss}}}}}}},'
            f'{{"ph":"X","cat":"process","name":"{name}","pid":{pid},"tid":{pid},'
            f'"ts":{a / 1000},"dur":{(b - a) / 1000}}},')

    proc(make, -1, "make", 0, 600 * S, 0, S, S, 9000)
    for i, pid in enumerate(pids[1:]):
        a = (i * 7919 * MS) % (590 * S)
        code = 1 if i % 50 == 0 else 0
        nonzero += code
        proc(pid, make if i % 4 == 0 else pids[1 + (i // 4) * 4], f"prog{i % 37}", a,
             a + MS + (i * 104729 * 1000) % (9 * S), code, (i * 7717) % S, (i * 31) % (S // 10),
             1000 + (i * 613) % 900000)
    out[-1] = out[-1].rstrip(",")
    out.append('],"otherData":{"forktrace":{"origin":"forktrace run","command":["make"],'
               f'"exit_status":0,"processes":{n},"lost_events":0}}}}}}')
    with open(path, "w") as f:
        f.write("".join(out))
    return nonzero


def run_measured(argv, cwd):
    """(stdout, CPU seconds, peak RSS KiB) of argv, measured by a wrapper
    that reports its child's getrusage: CPU time, not wall time, so that
    a loaded machine does not decide the result."""
    code = ("import resource, subprocess, sys\n"
            "p = subprocess.run(sys.argv[1:], stdout=subprocess.PIPE)\n"
            "sys.stdout.buffer.write(p.stdout)\n"
            "ru = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
            "sys.stderr.write(f'{ru.ru_utime + ru.ru_stime} {ru.ru_maxrss} {p.returncode}\\n')\n")
    p = subprocess.run([sys.executable, "-c", code] + argv, cwd=cwd, capture_output=True,
                       timeout=120)
    cpu, rss, rc = p.stderr.decode().strip().split("\n")[-1].split()
    check(int(rc) == 0, f"{argv}: exit {rc}")
    return p.stdout.decode(), float(cpu), int(rss)


@test
def scale(t):
    """40,000 processes (10,000 in a sanitizer build, unmeasured): the
    summary stays one screen, is made in about the time a combine of the
    file takes (reading it is the work), with memory per process only;
    --tree lists every process in about that time too (children found by
    one sort, not a scan per process: that took 6 s of CPU). pids come in
    no order, as in a combine or after the pid counter wrapped."""
    timed = os.environ.get("FT_INFO_TIMED") == "1"
    n = 40_000 if timed else 10_000
    nonzero = write_big(t.path("big.json"), n)
    ft = forktrace_bin()
    _, t_combine, _ = run_measured([ft, "combine", "big.json", "-o", "copy.json"], t.dir)
    out, t_info, rss = run_measured([ft, "info", "big.json"], t.dir)
    check(len(lines_of(out)) <= MAX_LINES, f"{len(lines_of(out))} lines:\n{out}")
    check(line(out, "run:").startswith(f"10 min 0 s, {n:,} processes"), out)
    check(line(out, "non-zero:").startswith(f"{nonzero:,} processes exited non-zero"), out)
    size = os.path.getsize(t.path("big.json"))
    print(f"scale: {n} processes, {size / 1e6:.1f} MB: info {t_info:.2f} s CPU, combine "
          f"{t_combine:.2f} s, info's peak RSS {rss / 1024:.0f} MiB")
    # Reading is most of the work: the summary's own (a pass over the
    # processes, sorts) costs about as much again.
    check(not timed or t_info <= 3 * t_combine + 0.3,
          f"info took {t_info:.2f} s of CPU, a combine of the file {t_combine:.2f} s")
    # Memory per process, not per event or byte: ~1 KiB each (its record,
    # names) over a fixed base.
    check(not timed or rss < 60 * 1024 + n * 2, f"info's peak RSS {rss} KiB for {n} processes")
    tree, t_tree, _ = run_measured([ft, "info", "--tree", "big.json"], t.dir)
    rows = [l for l in lines_of(tree) if l.startswith("  ") and "events" in l and
            "[exit" in l]
    check(len(rows) == n, f"--tree lists {len(rows)} processes of {n}")
    check(not timed or t_tree <= 3 * t_combine + 0.5,
          f"info --tree took {t_tree:.2f} s of CPU, a combine of the file {t_combine:.2f} s")


MAKEFILE = """\
all: probes compile1 compile2 killed
probes:
\t@./configure
compile1:
\t@sleep 0.3
compile2:
\t@sleep 0.1; sleep 0.1
killed:
\t@./k.sh || true
"""

# A script that kills itself: a line of its own names it with its
# interpreter, as the critical path does.
KILLED_SCRIPT = """\
#!/bin/sh
kill -9 $$
"""

# A configure script: three probes that exit 1 by design.
CONFIGURE = """\
#!/bin/sh
for probe in a b c; do
    sh -c 'exit 1' || :
done
"""


@test
def real_build(t):
    """make -j2 under forktrace run: configure with three probes that exit
    1, two jobs, a process killed by SIGKILL. What info says, as text and JSON, is
    checked against the trace file itself: exits, the killed pid,
    per-program lifetimes, CPU time where the records hold it, and the
    critical path the trace holds."""
    if not shutil.which("make"):
        raise Skip("make is not installed")
    with open(t.path("Makefile"), "w") as f:
        f.write(MAKEFILE)
    with open(t.path("configure"), "w") as f:
        f.write(CONFIGURE)
    os.chmod(t.path("configure"), 0o755)
    with open(t.path("k.sh"), "w") as f:
        f.write(KILLED_SCRIPT)
    os.chmod(t.path("k.sh"), 0o755)
    run = t.run(["make", "-j2"], expect_rc=0)
    recs = {p.tpid: p.rec for p in run.trace.all()}
    nonzero = [r for r in recs.values() if r["exit"].get("kind") == "code" and
               r["exit"].get("code")]
    killed = sorted(tp for tp, r in recs.items() if r["exit"].get("kind") == "signal")
    check(len(nonzero) >= 3 and len(killed) == 1, f"the build:\n{run.trace.dump()}")
    res = t.forktrace(["info", "trace.json"])
    check(res.rc == 0, f"info:\n  {res.describe()}")
    out = res.out
    check(len(lines_of(out)) <= MAX_LINES, out)
    check(line(out, "command:") == "make -j2", out)
    check(line(out, "run:").endswith(f", {len(recs)} processes"), out)
    check(line(out, "exit:") == "the command succeeded (exit status 0)", out)
    check(f"  non-zero:    {len(nonzero)} processes exited non-zero: " in out, out)
    # Where the records name scripts (docs/INSIGHT.md, "Names"), the
    # probes are said to be configure's.
    if any(r.get("interpreter") for r in recs.values()):
        check(line(out, "non-zero:").endswith(": 3 sh (under configure)"), out)
    # A process in a line of its own is named as process_name names it.
    def named(r):
        return f"{r['name']} ({r['interpreter']})" if r.get("interpreter") else r["name"]
    check(line(out, "killed:") ==
          f"1 by a signal: {named(recs[killed[0]])} (pid {killed[0]}, SIGKILL)", out)
    check(named(recs[killed[0]]) == "k.sh (sh)", f"the build:\n{run.trace.dump()}")
    for _, name, tp in re.findall(r"(\S+ \S+) (.+?) \(pid (\d+)\)(?:, |$)",
                                  line(out, "peak memory:")):
        check(name == named(recs[int(tp)]), out)
    j = json.loads(t.forktrace(["info", "--json", "trace.json"]).out)
    check(j["processes"] == len(recs) and j["records"] == len(recs), f"{j}")
    check(j["exits"]["nonzero"] == len(nonzero) and
          [k["pid"] for k in j["exits"]["killed_processes"]] == killed, f"{j['exits']}")
    wall = {}
    for r in recs.values():
        wall[r["name"]] = wall.get(r["name"], 0) + r["end_ns"] - r["start_ns"]
    check({p["name"]: p["wall_ns"] for p in j["programs_by_wall"]} ==
          {n: w for n, w in wall.items() if n in {p["name"] for p in j["programs_by_wall"]}}
          and len(j["programs_by_wall"]) == min(10, len(wall)), f"{j['programs_by_wall']}")
    ru = [r["rusage"] for r in recs.values() if r.get("rusage")]
    if ru:
        check(j["cpu"] == {"processes": len(ru), "user_ns": sum(x["user_ns"] for x in ru),
                           "sys_ns": sum(x["sys_ns"] for x in ru)}, f"{j['cpu']}")
    else:
        check(j["cpu"] is None and "CPU time:    not in this trace" in out, out)
    cp = run.trace.doc["otherData"]["forktrace"].get("critical_path")
    if cp is None:
        check(j["critical_path"] is None, f"{j['critical_path']}")
    else:
        check((j["critical_path"]["start_ns"], j["critical_path"]["end_ns"],
               j["critical_path"]["steps"]) == (cp["start_ns"], cp["end_ns"], len(cp["steps"])),
              f"info {j['critical_path']}, the trace {cp}")
        path = lines_of(t.forktrace(["info", "--critical-path", "trace.json"]).out)
        a = next(i for i, l in enumerate(path) if l.startswith("  steps"))
        b = next(i for i, l in enumerate(path) if l.startswith("  per process"))
        check([l.split()[-1] for l in path[a + 1:b]] ==
              [f"{st['pid']})" for st in cp["steps"]], "\n".join(path))
        check(len(path) - b - 1 == len({st["pid"] for st in cp["steps"]}), "\n".join(path))


@test
def mpirun_ranks(t):
    """mpirun -np 2: the ranks info reports are the trace's (count, range,
    the launcher named in the records)."""
    hello = prog("mpi_hello")
    mpirun = os.environ.get("FT_MPIRUN")
    if not mpirun:
        raise Skip("FT_MPIRUN is not set")
    cmd = [mpirun, "-np", "2", "--oversubscribe"]
    if os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    run = t.run(cmd + [hello], expect_rc=0)
    ranked = [p.rec for p in run.trace.all() if p.rec.get("rank") is not None]
    check(sorted(r["rank"] for r in ranked) == [0, 1], f"ranks:\n{run.trace.dump()}")
    j = json.loads(t.forktrace(["info", "--json", "trace.json"]).out)
    launcher = ranked[0].get("launcher")
    check(j["ranks"] == {"processes": 2, "min": 0, "max": 1, "launcher": launcher} or
          (j["ranks"]["launcher"] == ranked[1].get("launcher") and
           j["ranks"]["processes"] == 2), f"{j['ranks']}")
    out = t.forktrace(["info", "trace.json"]).out
    want = ", 2 with a rank (0-1" + (f", {launcher})" if launcher else ")")
    check(line(out, "run:").endswith(want), f"expected {want!r}:\n{out}")


@test
def usage(t):
    res = t.forktrace(["info", "--help"])
    check(res.rc == 0 and all(o in res.out for o in ("--tree", "--json", "--critical-path")),
          f"info --help\n  {res.describe()}")
    for args in (["info", "--tree", "--critical-path", "x.json"],
                 ["info", "--json", "--tree", "x.json"]):
        res = t.forktrace(args)
        check(res.rc == 2, f"{args}: exit {res.rc}, expected 2\n  {res.describe()}")


if __name__ == "__main__":
    main()
