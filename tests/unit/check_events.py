#!/usr/bin/python3
"""Checks a trace written by test_events against docs/TRACE_FORMAT.md.

Usage: check_events.py model|chain FILE   (FILE may be .gz)

The model is the one test_events.c builds by hand; the expectations below
restate it. Exits non-zero with a message on the first mismatch.
"""
import collections
import gzip
import json
import re
import sys


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        raw = f.read()
    text = raw.decode("utf-8")  # strict: the writer must emit valid UTF-8
    return text, json.loads(text)


def eq(what, got, want):
    if got != want:
        raise AssertionError(f"{what}: got {got!r}, want {want!r}")


def common_checks(text, doc):
    eq("top-level keys", sorted(doc), ["displayTimeUnit", "otherData", "traceEvents"])
    eq("displayTimeUnit", doc["displayTimeUnit"], "ms")
    # Every ts and dur is microseconds with exactly three decimals.
    for m in re.finditer(r'"(ts|dur)":([^,}]*)', text):
        if not re.fullmatch(r"-?\d+\.\d{3}", m.group(2)):
            raise AssertionError(f"bad time {m.group(0)!r}")
    for ev in doc["traceEvents"]:
        for key in ("ph", "name", "pid", "tid"):
            assert key in ev, f"event without {key}: {ev}"
        if ev["ph"] != "M":
            assert "ts" in ev, f"event without ts: {ev}"
        if ev["ph"] == "X":
            assert ev["dur"] >= 0, ev
    flows = collections.defaultdict(list)
    for ev in doc["traceEvents"]:
        if ev["ph"] in ("s", "f"):
            flows[ev["id"]].append(ev)
    for fid, pair in flows.items():
        eq(f"flow {fid} phases", sorted(e["ph"] for e in pair), ["f", "s"])
        s = next(e for e in pair if e["ph"] == "s")
        f = next(e for e in pair if e["ph"] == "f")
        eq(f"flow {fid} name", s["name"], f["name"])
        eq(f"flow {fid} cat", (s["cat"], f["cat"]), ("fork", "fork"))
        eq(f"flow {fid} bp", f.get("bp"), "e")
        eq(f"flow {fid} child tid", f["tid"], f["pid"])
    return flows


def meta(doc, name):
    """{pid: args} of the process metadata events called name."""
    out = {}
    for ev in doc["traceEvents"]:
        if ev["ph"] == "M" and ev["name"] == name:
            assert ev["pid"] not in out, f"two {name} for {ev['pid']}"
            eq(f"{name} tid", ev["tid"], ev["pid"])
            out[ev["pid"]] = ev["args"]
    return out


def check_model(text, doc):
    flows = common_checks(text, doc)
    ft = doc["otherData"]["forktrace"]
    assert re.fullmatch(r"\d+\.\d+\.\d+", ft["version"]), ft["version"]
    eq("otherData", {k: v for k, v in ft.items() if k != "version"}, {
        "origin": "forktrace run",
        "host": "testhost",
        "command": ["make", "-j4"],
        "anchor": {"monotonic_ns": 123, "realtime_ns": 1700000000000000456},
        "start_ns": 500000000,
        "end_ns": 6000000000,
        "exit_status": 137,
        "processes": 5,
        "lost_events": 5,
        # 100 waited for 200 (ended last of its children that ended),
        # 200 for 300; the running 4194305 has no end, the orphan 400
        # ended first.
        "critical_path": {"start_ns": 1000000000, "end_ns": 5000000000, "steps": [
            {"pid": 100, "name": "make", "start_ns": 1000000000, "end_ns": 2000000500},
            {"pid": 200, "name": "make", "start_ns": 2000000500, "end_ns": 2100000000},
            {"pid": 300, "name": "as", "start_ns": 2100000000, "end_ns": 2500000000},
            {"pid": 200, "name": "make", "start_ns": 2500000000, "end_ns": 3000000000},
            {"pid": 100, "name": "make", "start_ns": 3000000000, "end_ns": 5000000000}]},
    })
    evs = doc["traceEvents"]
    R = 4194305  # trace pid of the reused pid 200
    odd_argv = ["./odd\"na\\me", "\x01\x1f\n\t", "bad\ufffd\ufffd(", "caf\u00e9",
                "\ufffd\ufffd\ufffd"]

    eq("process_name", {p: a["name"] for p, a in meta(doc, "process_name").items()},
       {100: "make", 200: "make", 300: "as", R: "odd\"na\\me", 400: "?"})
    eq("process_sort_index",
       {p: a["sort_index"] for p, a in meta(doc, "process_sort_index").items()},
       {400: 0, 100: 1, 200: 2, 300: 3, R: 4})
    labels = {p: a["labels"] for p, a in meta(doc, "process_labels").items()}
    eq("labels", labels, {100: "make -j4", 200: "make -j4", 300: "as -o x.o",
                          R: " ".join(odd_argv), 400: "?"})

    fp = meta(doc, "forktrace_process")
    eq("forktrace_process 100", fp[100], {
        "pid": 100, "ppid": 1, "parent": -1, "start_ticks": 4242, "name": "make",
        "exe": "/usr/bin/make", "argv": ["make", "-j4"], "cwd": "/src",
        "start_ns": 1000000000, "end_ns": 5000000000, "spawn": None,
        "exit": {"kind": "code", "code": 0}, "instrumented": True, "images": 2,
        "lost_events": 0, "host": "testhost"})
    eq("forktrace_process 200", fp[200], {
        "pid": 200, "ppid": 100, "parent": 100, "start_ticks": 0, "name": "make",
        "exe": "/usr/bin/make", "argv": ["make", "-j4"], "cwd": "/src",
        "start_ns": 2000000500, "end_ns": 3000000000, "spawn": "fork",
        "exit": {"kind": "signal", "signal": 9, "name": "SIGKILL"},
        "instrumented": True, "images": 1, "lost_events": 3, "host": "testhost"})
    eq("forktrace_process 300", fp[300], {
        "pid": 300, "ppid": 200, "parent": 200, "start_ticks": 0, "name": "as",
        "exe": "/usr/bin/as", "argv": ["as", "-o", "x.o"], "cwd": "/src",
        "start_ns": 2100000000, "end_ns": 2500000000, "spawn": "posix_spawn",
        "exit": {"kind": "code", "code": 1}, "instrumented": True, "images": 2,
        "lost_events": 0, "host": "testhost"})
    eq("forktrace_process reused", fp[R], {
        "pid": 200, "ppid": 100, "parent": 100, "start_ticks": 0, "name": "odd\"na\\me",
        "exe": None, "argv": odd_argv, "cwd": None,
        "start_ns": 3500000000, "end_ns": -1, "spawn": "vfork",
        "exit": {"kind": "running"}, "instrumented": True, "images": 1,
        "lost_events": 0, "host": "testhost"})
    eq("forktrace_process 400", fp[400], {
        "pid": 400, "ppid": 1, "parent": -1, "start_ticks": 0, "name": "?",
        "exe": None, "argv": None, "cwd": None,
        "start_ns": 500000000, "end_ns": 600000000, "spawn": None,
        "exit": {"kind": "unknown"}, "instrumented": False, "images": 0,
        "lost_events": 0, "host": "testhost"})

    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in evs
               if e["ph"] == "M" and e["name"] == "thread_name"}
    eq("thread names", threads, {
        (100, 100): "make", (100, 101): "worker", (100, 102): "make",
        (200, 200): "make", (300, 300): "as", (R, R): "odd\"na\\me",
        (R, 201): "t\"1\ufffd", (400, 400): "?"})
    tsort = {(e["pid"], e["tid"]): e["args"]["sort_index"] for e in evs
             if e["ph"] == "M" and e["name"] == "thread_sort_index"}
    eq("thread sort keys", set(tsort), set(threads))
    for (pid, tid), k in tsort.items():
        if tid == pid:
            eq(f"main thread of {pid} first", k, 0)
    eq("thread sort 100", [tsort[(100, t)] for t in (100, 101, 102)], [0, 1, 2])

    slices = [e for e in evs if e["ph"] == "X" and e.get("cat") == "process"]
    got = sorted((e["pid"], e["tid"], e["name"], e["ts"], e["dur"], e["args"]["image"],
                  e["args"]["instrumented"], "exit" in e["args"]) for e in slices)
    eq("image slices", got, sorted([
        (100, 100, "sh", 1000000.0, 500000.0, 0, True, False),
        (100, 100, "make", 1500000.0, 3500000.0, 1, True, True),
        (200, 200, "make", 2000000.5, 999999.5, 0, True, True),
        (300, 300, "cc", 2100000.0, 100000.0, 0, True, False),
        (300, 300, "as (not instrumented)", 2200000.0, 300000.0, 1, False, True),
        (R, R, "odd\"na\\me", 3500000.0, 2500000.0, 0, True, True),
    ]))
    by = {(e["pid"], e["name"]): e["args"] for e in slices}
    eq("sh args", by[(100, "sh")], {"image": 0, "exe": "/bin/sh",
                                   "argv": ["/bin/sh", "-c", "make -j4"], "cwd": "/src",
                                   "instrumented": True})
    eq("200 exit", by[(200, "make")]["exit"],
       {"kind": "signal", "signal": 9, "name": "SIGKILL"})
    eq("as exit", by[(300, "as (not instrumented)")]["exit"], {"kind": "code", "code": 1})
    eq("reused argv", by[(R, "odd\"na\\me")]["argv"], odd_argv)

    pairs = {}
    for fid, pair in flows.items():
        s = next(e for e in pair if e["ph"] == "s")
        f = next(e for e in pair if e["ph"] == "f")
        pairs[f["pid"]] = (s["name"], s["pid"], s["tid"], s["ts"], f["ts"])
    eq("flows", pairs, {
        200: ("fork", 100, 101, 2000000.123, 2000000.5),
        300: ("posix_spawn", 200, 200, 2100000.0, 2100000.0),
        R: ("vfork", 100, 100, 3500000.0, 3500000.0),
    })
    # The exact text of a known nanosecond value.
    assert '"ts":2000000.123' in text, "spawn ts of 200 not written as 2000000.123"
    assert '"ts":2000000.500' in text

    marks = sorted((e["pid"], e["tid"], e["ph"], e.get("s"), e["cat"], e["name"], e["ts"],
                    e.get("dur"), json.dumps(e.get("args"), sort_keys=True))
                   for e in evs if e.get("cat") in ("exec", "shell", "signal"))
    eq("marks", marks, sorted([
        (100, 101, "i", "t", "exec", "exec failed", 1600000.0, None,
         json.dumps({"path": "/nope", "errno": 2, "error": "No such file or directory"},
                    sort_keys=True)),
        (100, 100, "X", None, "shell", "system", 1700000.0, 250.0,
         json.dumps({"cmd": "true", "status": 0}, sort_keys=True)),
        (R, 201, "i", "t", "signal", "SIGSEGV", 3600000.0, None,
         json.dumps({"signal": 11}, sort_keys=True)),
    ]))

    loss = [e for e in evs if e.get("cat") == "forktrace.loss"]
    eq("lost events", [(e["ph"], e["s"], e["name"], e["pid"], e["tid"], e["ts"], e["args"])
                       for e in loss],
       [("i", "p", "lost events", 200, 200, 3000000.0, {"count": 3})])

    # 4 process metadata + 2 per thread + images + 2 per flow + marks + loss.
    eq("event count", len(evs), 5 * 4 + 8 * 2 + 6 + 3 * 2 + 3 + 1)


def check_chain(text, doc):
    flows = common_checks(text, doc)
    n = 10000
    eq("processes", doc["otherData"]["forktrace"]["processes"], n)
    sort = {p: a["sort_index"] for p, a in meta(doc, "process_sort_index").items()}
    eq("chain sort order", sort, {1000 + i: i for i in range(n)})
    parents = {p: a["parent"] for p, a in meta(doc, "forktrace_process").items()}
    eq("chain parents", parents, {1000 + i: (999 + i if i else -1) for i in range(n)})
    eq("chain flows", len(flows), n - 1)


def main():
    mode, path = sys.argv[1], sys.argv[2]
    text, doc = load(path)
    {"model": check_model, "chain": check_chain}[mode](text, doc)
    print(f"check_events.py {mode} {path}: ok")


if __name__ == "__main__":
    main()
