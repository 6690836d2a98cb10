#!/usr/bin/python3
"""Golden-style check of docs/TRACE_FORMAT.md on the smallest tree: fork_true
(fork, the child execs /bin/true, the parent waits). Every field the format
document lists must be present, with the right type and a value that
matches what happened. The same checker validates a hand-written trace in
test_harness.py, so it can be debugged without the collector.
"""

import decimal
import json
import os
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ftcheck as ft  # noqa: E402
from ftcheck import check, prog, test  # noqa: E402

def is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def is_num(v):
    return isinstance(v, (int, float, decimal.Decimal)) and not isinstance(v, bool)


def check_type(obj, key, pred, what, where):
    check(key in obj, f"{where}: key {key!r} missing (in {json.dumps(obj, default=str)[:400]})")
    check(pred(obj[key]), f"{where}: {key!r} should be {what}, is {obj[key]!r}")
    return obj[key]


def opt_str(v):
    return v is None or isinstance(v, str)


def str_list(v):
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


def exit_obj_ok(v):
    if not isinstance(v, dict):
        return False
    k = v.get("kind")
    if k == "code":
        return set(v) == {"kind", "code"} and is_int(v["code"])
    if k == "signal":
        return set(v) == {"kind", "signal", "name"} and is_int(v["signal"]) and \
            isinstance(v["name"], str)
    return k in ("unknown", "running") and set(v) == {"kind"}


def check_decimals(raw_text):
    """ts and dur are microseconds with at most three decimals."""
    doc = json.loads(raw_text, parse_float=decimal.Decimal)
    for e in doc["traceEvents"]:
        for key in ("ts", "dur"):
            if key in e:
                v = e[key]
                check(is_num(v), f"{key} of {e} is not a number")
                if isinstance(v, decimal.Decimal):
                    check(v.as_tuple().exponent >= -3,
                          f"{key} {v} has more than three decimals: {e}")


def check_fork_true(doc, *, prog_path, cwd, host, ft_pid, t0_ns, t1_ns, raw_text=None,
                    now_real_ns=None):
    """Validates a whole fork_true trace against docs/TRACE_FORMAT.md.
    t0_ns/t1_ns bracket the run in CLOCK_MONOTONIC ns (as this Python sees
    it); ft_pid is forktrace's pid (the root's parent)."""
    # ---- top level
    check(isinstance(doc, dict), "top level is not an object")
    check(doc.get("displayTimeUnit") == "ms", f"displayTimeUnit {doc.get('displayTimeUnit')!r}")
    check(isinstance(doc.get("traceEvents"), list), "traceEvents is not an array")
    meta = doc.get("otherData", {}).get("forktrace")
    check(isinstance(meta, dict), "otherData.forktrace missing")
    w = "otherData.forktrace"
    v = check_type(meta, "version", lambda x: isinstance(x, str) and x, "a non-empty string", w)
    check_type(meta, "origin", lambda x: x == "forktrace run", '"forktrace run"', w)
    check_type(meta, "host", lambda x: x == host, f"the host name {host!r}", w)
    check_type(meta, "command", lambda x: x == [prog_path], f"[{prog_path!r}]", w)
    anchor = check_type(meta, "anchor", lambda x: isinstance(x, dict), "an object", w)
    mono = check_type(anchor, "monotonic_ns", is_int, "an integer", w + ".anchor")
    real = check_type(anchor, "realtime_ns", is_int, "an integer", w + ".anchor")
    check(t0_ns - 10**9 <= mono <= t1_ns + 10**9,
          f"anchor.monotonic_ns {mono} is not within the run [{t0_ns}, {t1_ns}]")
    now_real = now_real_ns if now_real_ns is not None else time.time_ns()
    check(abs(real - now_real) < 120 * 10**9,
          f"anchor.realtime_ns {real} is far from now ({now_real}): not CLOCK_REALTIME ns?")
    start = check_type(meta, "start_ns", is_int, "an integer", w)
    end = check_type(meta, "end_ns", is_int, "an integer", w)
    check(t0_ns <= start <= end <= t1_ns,
          f"start_ns {start} / end_ns {end} not inside the run [{t0_ns}, {t1_ns}] "
          f"(CLOCK_MONOTONIC ns?)")
    check_type(meta, "exit_status", lambda x: x == 0, "0", w)
    check_type(meta, "processes", lambda x: x == 2, "2", w)
    check_type(meta, "lost_events", lambda x: x == 0, "0", w)
    del v

    # ---- every event: basic shape, inside the run
    lo_us, hi_us = start / 1000.0 - 0.002, end / 1000.0 + 0.002
    for e in doc["traceEvents"]:
        where = f"event {json.dumps(e)[:300]}"
        check(e.get("ph") in ("M", "X", "i", "s", "f", "C"), f"{where}: unexpected ph")
        check(is_int(e.get("pid")) and is_int(e.get("tid")), f"{where}: pid/tid not integers")
        check(isinstance(e.get("name"), str), f"{where}: name is not a string")
        if e["ph"] != "M":
            check(is_num(e.get("ts")), f"{where}: no numeric ts")
            check(lo_us <= e["ts"] <= hi_us, f"{where}: ts outside [start_ns, end_ns]/1000")
        if e["ph"] == "X":
            check(is_num(e.get("dur")) and e["dur"] >= 0, f"{where}: bad dur")
            check(e["ts"] + e["dur"] <= hi_us, f"{where}: ends after end_ns")
    if raw_text is not None:
        check_decimals(raw_text)

    tr = ft.Trace(doc, "trace")
    ft.assert_count(tr.all(), 2, "processes", tr)
    root = tr.root()
    kids = tr.children(root)
    ft.assert_count(kids, 1, "children of the root", tr)
    child = kids[0]

    # ---- forktrace_process records
    types = {
        "pid": (is_int, "an integer"), "ppid": (is_int, "an integer"),
        "parent": (is_int, "an integer"), "start_ticks": (lambda x: is_int(x) and x >= 0, ">= 0"),
        "name": (lambda x: isinstance(x, str), "a string"), "exe": (opt_str, "a string or null"),
        "argv": (lambda x: x is None or str_list(x), "an array of strings or null"),
        "cwd": (opt_str, "a string or null"), "start_ns": (is_int, "an integer"),
        "end_ns": (is_int, "an integer"),
        "spawn": (lambda x: x is None or x in ft.SPAWN_KINDS, "a spawn kind or null"),
        "exit": (exit_obj_ok, "an exit object"), "instrumented": (lambda x: isinstance(x, bool),
                                                                  "a boolean"),
        "images": (lambda x: is_int(x) and x >= 1, "an integer >= 1"),
        "lost_events": (lambda x: x == 0, "0"),
    }
    for p in (root, child):
        for key, (pred, what) in types.items():
            check_type(p.rec, key, pred, what, f"forktrace_process of pid {p.tpid}")
        check(p.rec["pid"] == p.tpid, f"trace pid {p.tpid} differs from host pid {p.rec['pid']} "
              f"without pid reuse")
        check(p.rec["start_ns"] <= p.rec["end_ns"], f"{p.describe()}: start_ns > end_ns")
        check(start <= p.rec["start_ns"] and p.rec["end_ns"] <= end,
              f"{p.describe()}: lifetime outside the run")
        check(p.rec["cwd"] == cwd, f"{p.describe()}: cwd {p.rec['cwd']!r}, expected {cwd!r}")
        check(p.rec["exit"] == {"kind": "code", "code": 0}, f"{p.describe()}: exit")
        check(p.rec["instrumented"] is True, f"{p.describe()}: not instrumented")
        check(p.rec["start_ticks"] > 0, f"{p.describe()}: start_ticks unknown for an "
              f"instrumented process")
    r, c = root.rec, child.rec
    check(r["ppid"] == ft_pid, f"root ppid {r['ppid']}, forktrace's pid is {ft_pid}")
    check(r["parent"] == -1 and r["spawn"] is None, f"root: {root.describe()}")
    check(r["name"] == "fork_true" and r["argv"] == [prog_path], f"root: {root.describe()}")
    check(os.path.realpath(r["exe"]) == os.path.realpath(prog_path), f"root exe {r['exe']!r}")
    check(r["images"] == 1, f"root images {r['images']}")
    check(c["ppid"] == r["pid"] and c["parent"] == root.tpid, f"child: {child.describe()}")
    check(c["spawn"] == "fork", f"child spawn {c['spawn']!r}")
    check(c["name"] == "true" and c["argv"] == ["true"], f"child: {child.describe()}")
    check(os.path.realpath(c["exe"]) == os.path.realpath("/bin/true"), f"child exe {c['exe']!r}")
    check(r["start_ns"] <= c["start_ns"] and c["end_ns"] <= r["end_ns"],
          "the child's lifetime is not inside the root's")
    check(c["start_ticks"] >= r["start_ticks"], "child started (ticks) before its parent")

    # ---- per-process metadata events
    for p in (root, child):
        where = f"process {p.tpid}"
        for name in ("process_name", "process_labels", "process_sort_index", "forktrace_process"):
            evs = [e for e in p.events if e["ph"] == "M" and e["name"] == name]
            ft.assert_count(evs, 1, f"{name} events of {where}")
            check(evs[0]["tid"] == p.tpid, f"{name} of {where} has tid {evs[0]['tid']}")
        pn = p.meta["process_name"][0]
        check(pn.get("name") == p.rec["name"], f"process_name {pn} != forktrace_process name")
        labels = check_type(p.meta["process_labels"][0], "labels",
                            lambda x: isinstance(x, str) and 0 < len(x) <= 200,
                            "a string of 1..200 characters", where)
        check(p.rec["argv"][-1] in labels or os.path.basename(p.rec["argv"][0]) in labels,
              f"process_labels {labels!r} does not show the command line {p.rec['argv']}")
        check_type(p.meta["process_sort_index"][0], "sort_index", is_int, "an integer", where)
        # threads: the main thread, named after the program, sorted first
        check(p.threads.get(p.rec["pid"]) == p.rec["name"],
              f"{where}: main thread name {p.threads.get(p.rec['pid'])!r}, "
              f"expected {p.rec['name']!r} (threads {p.threads})")
        tsi = [e for e in p.events if e["ph"] == "M" and e["name"] == "thread_sort_index"]
        check(any(e["tid"] == p.rec["pid"] and is_int((e.get("args") or {}).get("sort_index"))
                  for e in tsi), f"{where}: no thread_sort_index for the main thread: {tsi}")
    check(root.meta["process_sort_index"][0]["sort_index"] <
          child.meta["process_sort_index"][0]["sort_index"],
          "the child does not sort after its parent (depth-first order)")

    # ---- fork flow
    starts = [e for e in tr.flows("s") if e["pid"] == root.tpid]
    ends = [e for e in tr.flows("f") if e["pid"] == child.tpid]
    ft.assert_count(starts, 1, "fork flow starts in the root")
    ft.assert_count(ends, 1, "fork flow ends in the child")
    s, f = starts[0], ends[0]
    for e in (s, f):
        check(e.get("name") == "fork" and e.get("cat") == "fork", f"flow {e}: name/cat")
        check("id" in e and (is_int(e["id"]) or isinstance(e["id"], str)), f"flow {e}: id")
    check(s["id"] == f["id"], f"flow ids differ: {s} {f}")
    check(s["tid"] == root.rec["pid"], f"flow start not on the forking (main) thread: {s}")
    check(f.get("bp") == "e" and f["tid"] == child.rec["pid"], f"flow end: {f}")
    check(s["ts"] <= f["ts"] + 0.001, f"flow ends before it starts: {s} {f}")

    # ---- wait mark
    waits = root.marks(cat="wait", name="wait")
    ft.assert_count(waits, 1, "wait marks in the root")
    wm = waits[0]
    check(wm.get("ph") == "i" and wm.get("s") == "t", f"wait mark: {wm}")
    check(wm["tid"] == root.rec["pid"], f"wait mark not on the main thread: {wm}")
    wa = wm.get("args") or {}
    check(wa.get("child") == child.rec["pid"] and wa.get("exit") == {"kind": "code", "code": 0},
          f"wait mark args {wa}, expected child {child.rec['pid']} and exit code 0")

    # ---- image slices (a forked child that execs has two: the fork copy, then true)
    check(c["images"] == 2, f"child images {c['images']} (fork copy + /bin/true)")
    rs = root.image_slices
    ft.assert_count(rs, 1, "image slices of the root")
    cs = child.image_slices
    ft.assert_count(cs, 2, "image slices of the child")
    for sl, image, name, exe, argv, last, owner in (
            (rs[0], 0, "fork_true", prog_path, [prog_path], True, root),
            (cs[0], 0, "fork_true", prog_path, [prog_path], False, child),
            (cs[1], 1, "true", "/bin/true", ["true"], True, child)):
        where = f"image slice {json.dumps(sl)[:300]}"
        check(sl.get("cat") == "process" and sl.get("name") == name, f"{where}: name/cat")
        check(sl["pid"] == owner.tpid and sl["tid"] == owner.rec["pid"],
              f"{where}: not on the main thread")
        a = check_type(sl, "args", lambda x: isinstance(x, dict), "an object", where)
        check(a.get("image") == image, f"{where}: image {a.get('image')} expected {image}")
        check(isinstance(a.get("exe"), str) and
              os.path.realpath(a["exe"]) == os.path.realpath(exe), f"{where}: exe")
        check(a.get("argv") == argv, f"{where}: argv")
        check(a.get("cwd") == cwd, f"{where}: cwd")
        check(a.get("instrumented") is True, f"{where}: instrumented")
        if last:
            check(a.get("exit") == {"kind": "code", "code": 0}, f"{where}: exit of the last image")
        else:
            check("exit" not in a, f"{where}: exit on an image that is not the last")
    check(cs[0]["ts"] + cs[0]["dur"] <= cs[1]["ts"] + 0.001, "the child's images overlap")
    check(rs[0]["ts"] <= cs[0]["ts"] + 0.001, "the child's first image starts before the root's")
    check(wm["ts"] + 0.001 >= cs[1]["ts"], f"the wait happened before the child's exec: {wm}")

    # ---- nothing else
    check(not child.marks(), f"unexpected marks in the child: {child.marks()}")
    check(not root.marks(cat="exec") and not root.marks(cat="signal") and
          not root.marks(cat="forktrace.loss"), f"unexpected marks in the root: {root.marks()}")
    return tr


@test
def test_trace_format(t):
    path = prog("fork_true")
    t0 = time.monotonic_ns()
    res = t.run([path], expect_rc=0)
    t1 = time.monotonic_ns()
    with open(res.out_path, encoding="utf-8") as f:
        raw = f.read()
    check_fork_true(ft.load_json(res.out_path), prog_path=path, cwd=os.path.realpath(t.dir),
                    host=socket.gethostname(), ft_pid=res.pid, t0_ns=t0, t1_ns=t1, raw_text=raw)


@test
def test_runs_with_writers(t):
    # Runs of a forking tree one after another, each written through the
    # writer's worker threads: under ThreadSanitizer (label threads) each
    # run must end without a report, which halts forktrace with exit 66. A
    # sentinel cloned into forktrace's own memory through TSan's clone
    # interceptor made about one run in three report a race in opipe.
    for i in range(8):
        res = t.run([prog("fork_tree")], out=f"t{i}.json", expect_rc=0)
        check(len(res.trace.all()) == 15, f"run {i}: {len(res.trace.all())} processes")


if __name__ == "__main__":
    ft.main()
