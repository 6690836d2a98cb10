#!/usr/bin/python3
"""End-to-end tests of `forktrace combine` and `forktrace info` on real
VizTracer 1.1.1 traces (../shared/data/viztracer), on traces written by
`forktrace run`, and on damaged inputs."""

import collections
import glob
import gzip
import json
import os
import re
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ftcheck as ft  # noqa: E402
from ftcheck import check, prog, test  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.environ.get("FT_VIZTRACER_DATA") or os.path.normpath(
    os.path.join(HERE, "..", "..", "..", "shared", "data", "viztracer"))
SUMMARY_RE = re.compile(r"^forktrace: combined (\d+) files?, (\d+) events, (\d+) processes "
                        r"\((\d+) pids remapped\) into (.+)$", re.M)
REMAP_BASE = 4194304
SYNTH = ("forktrace_origin",)


def data(*parts):
    path = os.path.join(DATA, *parts)
    if not glob.glob(path):
        # CI has shared/ beside the clone: there, missing data is a failure.
        if os.environ.get("CI"):
            ft.fail(f"VizTracer sample traces not found at {path} (CI is set)")
        raise ft.Skip(f"VizTracer sample traces not found at {path}")
    return path


def read_doc(path):
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    return json.loads(raw)


def in_events(paths):
    out = []
    for p in paths:
        d = read_doc(p)
        out += d["traceEvents"] if isinstance(d, dict) else d
    return out


def canon(e):
    return json.dumps(e, sort_keys=True)


def combine(t, args, expect_rc=0, out="out.json"):
    res = t.forktrace(["combine"] + list(args) + ["-o", out])
    check(res.rc == expect_rc, f"exit {res.rc}, expected {expect_rc}\n  {res.describe()}")
    path = t.path(out)
    check(os.path.exists(path), f"no output {path}\n  {res.describe()}")
    doc = ft.load_json(path)  # strict: valid UTF-8, valid JSON, no duplicate keys
    check(isinstance(doc, dict) and isinstance(doc.get("traceEvents"), list),
          f"output is not a trace object\n  {res.describe()}")
    meta = doc.get("otherData", {}).get("forktrace", {})
    check(meta.get("origin") == "forktrace combine", f"origin is {meta.get('origin')!r}")
    m = SUMMARY_RE.search(res.err)
    check(m, f"no summary line\n  {res.describe()}")
    res.summary = m
    res.doc = doc
    res.events = doc["traceEvents"]
    check(int(m.group(3)) == len({e.get("pid") for e in res.events}),
          f"summary says {m.group(3)} processes, the output has "
          f"{len({e.get('pid') for e in res.events})} pids\n  {res.describe()}")
    return res


def real_events(events):
    """Events that came from the inputs (not the origin records combine adds)."""
    return [e for e in events if not (e.get("ph") == "M" and e.get("name") in SYNTH)
            and not (e.get("ph") == "M" and e.get("name") == "process_labels"
                     and str((e.get("args") or {}).get("labels", "")).startswith("pid "))]


def same_events(got, want, what):
    g = collections.Counter(canon(e) for e in got)
    w = collections.Counter(canon(e) for e in want)
    if g != w:
        missing = list((w - g).elements())[:3]
        extra = list((g - w).elements())[:3]
        ft.fail(f"{what}: {sum(w.values())} events in, {sum(g.values())} out; "
                f"missing e.g. {missing}; unexpected e.g. {extra}")


@test
def test_viztracer_8proc(t):
    d = data("v1.1.1_cli_pid_suffix_8proc")
    files = sorted(glob.glob(os.path.join(d, "*.json.gz")))
    res = combine(t, [d])
    want = in_events(files)
    same_events(res.events, want, "8 VizTracer files")
    check(res.summary.group(1) == "8" and int(res.summary.group(2)) == len(want),
          f"summary: {res.summary.group(0)}")
    procs = collections.defaultdict(dict)
    for e in res.events:
        if e.get("ph") == "M" and e.get("name") == "process_name":
            procs[e["pid"]]["name"] = e["args"]["name"]
        if e.get("ph") == "M" and e.get("name") == "thread_name":
            procs[e["pid"]].setdefault("threads", set()).add(e["args"]["name"])
    check(len(procs) == 8, f"expected 8 processes, got {sorted(procs)}")
    for pid, p in procs.items():
        check(p.get("name") == "MainProcess" and p.get("threads") == {"MainThread", "helper"},
              f"process {pid}: {p}")
    inputs = [i["path"] for i in res.doc["otherData"]["forktrace"]["inputs"]]
    check([os.path.basename(p) for p in inputs] == [os.path.basename(f) for f in files],
          f"inputs listed {inputs}")


@test
def test_viztracer_event_kinds(t):
    f = glob.glob(os.path.join(data("v1.1.1_event_kinds"), "*.json.gz"))[0]
    res = combine(t, [f])
    want = in_events([f])
    same_events(res.events, want, "event-kinds file")
    kinds = collections.Counter(e["ph"] for e in res.events)
    for ph in "XiCNOM":
        check(kinds[ph] > 0, f"no {ph!r} event in the output: {kinds}")
    with_args = [e for e in res.events if "args" in e]
    check(len(with_args) == sum(1 for e in want if "args" in e), "args lost")


@test
def test_viztracer_forkheavy(t):
    files = sorted(glob.glob(os.path.join(data("v1.1.1_combined_forkheavy"), "*.json.gz")))
    res = combine(t, files)
    want = in_events(files)
    pids_in = [{e["pid"] for e in in_events([f])} for f in files]
    check(len(pids_in[0]) == 51 and len(pids_in[1]) == 21, f"pids in the inputs: {pids_in}")
    overlap = pids_in[0] & pids_in[1]
    check(int(res.summary.group(3)) == 72 and int(res.summary.group(4)) == len(overlap),
          f"summary: {res.summary.group(0)}")
    if not overlap:
        same_events(res.events, want, "fork-heavy files")
    check(len(real_events(res.events)) == len(want), "event count changed")


@test
def test_pid_collision(t):
    f = sorted(glob.glob(os.path.join(data("v1.1.1_cli_pid_suffix_8proc"), "*.json.gz")))[0]
    g = t.path("copy.json.gz")
    shutil.copy(f, g)
    res = combine(t, [f, g])
    want = in_events([f])
    pid = want[0]["pid"]
    pids = {e["pid"] for e in res.events}
    check(len(pids) == 2 and pid in pids, f"expected 2 processes, pid {pid} kept: {pids}")
    new = (pids - {pid}).pop()
    check(new >= REMAP_BASE, f"remapped pid {new} is not above {REMAP_BASE}")
    check(res.summary.group(4) == "1", f"summary: {res.summary.group(0)}")
    origin = [e for e in res.events if e.get("name") == "forktrace_origin"]
    check(len(origin) == 1 and origin[0]["pid"] == new and origin[0]["args"]["pid"] == pid
          and origin[0]["args"]["input"].endswith("copy.json.gz"), f"origin records {origin}")
    mine = [e for e in res.events if e["pid"] == new and e.get("name") not in SYNTH]
    check(len(real_events(mine)) == len(want), "events of the copy lost")
    # The main thread (tid == pid) follows its process; other threads keep theirs.
    tids = {e["tid"] for e in mine}
    check(new in tids and pid not in tids, f"tids of the remapped process: {tids}")
    names = {e["args"]["name"] for e in mine if e.get("name") == "thread_name"}
    check(names == {"MainThread", "helper"}, f"thread names {names}")


def fake_trace(path, pid0, real_shift_ns, dst):
    """tests/e2e/fake_trace.json with pids moved by pid0 and the realtime
    anchor moved by real_shift_ns."""
    doc = json.load(open(path))
    for e in doc["traceEvents"]:
        e["pid"] += pid0
        e["tid"] += pid0
        if e.get("name") == "forktrace_process":
            e["args"]["parent"] = e["args"]["parent"] + pid0 if e["args"]["parent"] > 0 else -1
    doc["otherData"]["forktrace"]["anchor"]["realtime_ns"] += real_shift_ns
    with open(dst, "w") as f:
        json.dump(doc, f)
    return doc


@test
def test_align(t):
    src = os.path.join(HERE, "fake_trace.json")
    a = fake_trace(src, 0, 0, t.path("a.json"))
    b = fake_trace(src, 100, 5_000_000_000, t.path("b.json"))
    viz = sorted(glob.glob(os.path.join(data("v1.1.1_cli_pid_suffix_8proc"), "*.json.gz")))[0]
    res = combine(t, ["--align", "a.json", "b.json", viz])
    inputs = res.doc["otherData"]["forktrace"]["inputs"]
    check([i["align"] for i in inputs] == ["realtime anchor", "realtime anchor", "start time"],
          f"align methods {inputs}")
    check(inputs[1]["shift_ns"] == 5_000_000_000, f"shift of b: {inputs}")
    # Flow ids of the second input move to its own namespace (test_flow_ids).
    def key(e):
        return canon({k: v for k, v in e.items() if k not in ("ts", "id")})
    ts_a = {key(e): e.get("ts") for e in a["traceEvents"]}
    b_pids = {e["pid"] for e in b["traceEvents"]}
    for e in res.events:
        if e["pid"] in b_pids and "ts" in e:
            orig = next(x for x in b["traceEvents"] if key(x) == key(e))
            check(abs(e["ts"] - (orig["ts"] + 5_000_000)) < 0.0015,
                  f"b's event not shifted by 5 s: {orig['ts']} -> {e['ts']}")
        elif e["pid"] not in b_pids and key(e) in ts_a:
            check(e.get("ts") == ts_a[key(e)], f"a's event moved: {e}")
    a_start = min(e["ts"] for e in a["traceEvents"] if "ts" in e and e["ph"] != "M")
    viz_pid = in_events([viz])[0]["pid"]
    v_start = min(e["ts"] for e in res.events if e["pid"] == viz_pid and "ts" in e)
    check(abs(v_start - a_start) < 0.0015, f"VizTracer file starts at {v_start}, a at {a_start}")
    check("aligned by realtime anchor" in res.err and "aligned by start time" in res.err,
          f"no per-input align report\n  {res.describe()}")


@test
def test_directory_and_gzip_by_content(t):
    d = t.subdir("traces")
    src = sorted(glob.glob(os.path.join(data("v1.1.1_cli_pid_suffix_8proc"), "*.json.gz")))
    shutil.copy(src[0], os.path.join(d, "first.dat"))           # gzip, no telling name
    with open(os.path.join(d, "second.json"), "wb") as f:         # gzip named .json
        f.write(open(src[1], "rb").read())
    with open(os.path.join(d, "third.trace"), "wb") as f:         # plain, no telling name
        f.write(gzip.open(src[2]).read())
    with open(os.path.join(d, "notes.txt"), "w") as f:
        f.write("not a trace\n")
    res = combine(t, [d])
    check(res.summary.group(1) == "3", f"expected 3 files from the directory: {res.summary.group(0)}")
    same_events(res.events, in_events(src[:3]), "directory")


def good_file(t):
    f = sorted(glob.glob(os.path.join(data("v1.1.1_cli_pid_suffix_8proc"), "*.json.gz")))[0]
    return f, in_events([f])


def complete_events_before(text, cut):
    """Events of a VizTracer text cut at byte cut: how many are complete,
    and where the first incomplete one starts."""
    dec = json.JSONDecoder()
    i = text.index("[") + 1
    n = 0
    while True:
        while text[i] in " \n,":
            i += 1
        try:
            _, j = dec.raw_decode(text[:cut], i)
        except json.JSONDecodeError:
            return n, i
        n += 1
        i = j


@test
def test_truncated_salvage(t):
    good, good_ev = good_file(t)
    src = sorted(glob.glob(os.path.join(data("v1.1.1_cli_pid_suffix_8proc"), "*.json.gz")))[1]
    text = gzip.open(src).read().decode()
    cut = int(len(text) * 0.6)
    with open(t.path("cut.json"), "w") as f:
        f.write(text[:cut])
    n, at = complete_events_before(text, cut)
    res = combine(t, [good, "cut.json"], expect_rc=1)
    check(re.search(rf"warning: cut.json: byte {at}\b.*salvaged", res.err),
          f"no warning naming cut.json and byte {at}\n  {res.describe()}")
    pid = in_events([src])[0]["pid"]
    kept = [e for e in res.events if e["pid"] == pid]
    check(len(kept) == n, f"kept {len(kept)} events of the cut file, {n} were complete")
    same_events([e for e in res.events if e["pid"] != pid], good_ev, "the good file")
    # Cut inside gzip too.
    raw = open(src, "rb").read()
    with open(t.path("cut.json.gz"), "wb") as f:
        f.write(raw[:len(raw) // 2])
    res = combine(t, [good, "cut.json.gz"], expect_rc=1, out="out2.json")
    check("cut.json.gz" in res.err and "byte" in res.err and "salvaged" in res.err,
          f"no warning for the cut gzip\n  {res.describe()}")
    check(len([e for e in res.events if e["pid"] == pid]) > 1000, "nothing salvaged from gzip")


BAD = {
    "not_a_trace": (b"hello, this is not a trace\n", "expected '{' or '['"),
    "corrupt_gzip": (b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03" + b"\xff" * 200, "corrupt gzip"),
    "empty": (b"", "empty file"),
    "deep_nesting": (b'{"traceEvents":[{"ph":"X","pid":9,"tid":9,"ts":1,"dur":1,"name":"a"},'
                     b'{"ph":"i","pid":9,"tid":9,"ts":2,"name":"deep","args":' + b"[" * 100 +
                     b"]" * 100 + b"}]}", "nesting"),
    "huge_string": (b'{"traceEvents":[{"ph":"X","pid":9,"tid":9,"ts":1,"dur":1,"name":"a"},'
                    b'{"ph":"i","pid":9,"tid":9,"ts":2,"name":"' + b"x" * (20 << 20) + b'"}]}',
                    "larger than"),
    "syntax": (b'{"traceEvents":[{"ph":"X","pid":9,"tid":9,"ts":1,"dur":1,"name":"a"} '
               b'{"ph":"X","pid":9}]}', "expected ',' or ']' after an event"),
}


@test
def test_bad_inputs(t):
    good, good_ev = good_file(t)
    for name, (content, msg) in BAD.items():
        path = t.path(name + ".json")
        with open(path, "wb") as f:
            f.write(content)
        res = combine(t, [path, good], expect_rc=1, out=name + "-out.json")
        line = [l for l in res.err.splitlines() if name + ".json" in l and "byte" in l]
        check(line and msg in line[0], f"{name}: no message naming the file, a byte and "
              f"{msg!r}\n  {res.describe()}")
        same_events([e for e in res.events if e["pid"] != 9], good_ev, f"{name}: the good file")
        if name in ("deep_nesting", "huge_string", "syntax"):
            kept = [e for e in res.events if e["pid"] == 9]
            check(len(kept) == 1 and kept[0]["name"] == "a",
                  f"{name}: the event before the problem was not kept: {kept}")


@test
def test_invalid_utf8(t):
    good, good_ev = good_file(t)
    with open(t.path("bad.json"), "wb") as f:
        f.write(b'[{"ph":"X","pid":9,"tid":9,"ts":1,"dur":1,"name":"caf\xe9 \xff","args":'
                b'{"k":"\x01ok"}},{"ph":"i","pid":9,"tid":9,"ts":2,"s":"t","name":"fine"}]')
    res = combine(t, ["bad.json", good], expect_rc=1)
    check(re.search(r"bad.json: byte 1: 1 event with invalid UTF-8", res.err),
          f"no warning naming bad.json and its offset\n  {res.describe()}")
    mine = [e for e in res.events if e["pid"] == 9]
    check(len(mine) == 2, f"events of bad.json: {mine}")
    x = next(e for e in mine if e["ph"] == "X")
    check(x["name"] == "caf\ufffd \ufffd" and x["args"] == {"k": "\x01ok"}, f"repaired event {x}")
    same_events([e for e in res.events if e["pid"] != 9], good_ev, "the good file")


@test
def test_string_pids_and_array_form(t):
    with open(t.path("arr.json"), "w") as f:
        # Array form without the closing bracket: allowed by the format.
        f.write('[{"ph":"X","pid":"42","tid":"7","ts":1.5,"dur":2,"name":"a"},\n'
                '{"ph":"X","pid":"Renderer","tid":1,"ts":3,"dur":1,"name":"b"},\n')
    res = combine(t, ["arr.json"])
    a = next(e for e in res.events if e.get("name") == "a")
    b = next(e for e in res.events if e.get("name") == "b")
    check(a["pid"] == "42", f"a numeric string pid that is not remapped stays as written: {a}")
    check(isinstance(b["pid"], int) and b["pid"] >= REMAP_BASE, f"string pid not mapped: {b}")
    names = [e for e in res.events if e.get("name") == "process_name" and e["pid"] == b["pid"]]
    check(names and names[0]["args"]["name"] == "Renderer", f"string pid lost its name: {names}")


@test
def test_forktrace_roundtrip(t):
    run = t.run([prog("fork_tree")], out="run.json", expect_rc=0)
    res = combine(t, ["run.json"])
    same_events(res.events, run.trace.events, "forktrace run trace")
    tr = ft.Trace(res.doc, t.path("out.json"))
    check(set(tr.procs) == set(run.trace.procs), "processes changed")
    for pid, p in run.trace.procs.items():
        check(tr.procs[pid].rec == p.rec, f"record of {pid} changed")
    # Twice: the second copy is remapped, its parent links follow.
    res = combine(t, ["run.json", "run.json"], out="twice.json")
    tr = ft.Trace(res.doc, t.path("twice.json"))
    check(len(tr.procs) == 2 * len(run.trace.procs), f"{len(tr.procs)} processes")
    roots = tr.roots()
    check(len(roots) == 2, f"expected two roots: {roots}")
    for p in tr.procs.values():
        check(p.rec["parent"] == -1 or p.rec["parent"] in tr.procs, f"dangling parent {p}")
        if p.tpid >= REMAP_BASE and p.rec["parent"] != -1:
            check(p.rec["parent"] >= REMAP_BASE, f"remapped child under the original: {p}")


@test
def test_info(t):
    run = t.run([prog("fork_tree")], out="run.json", expect_rc=0)
    res = t.forktrace(["info", "--tree", "run.json"])
    check(res.rc == 0, f"info exit {res.rc}\n  {res.describe()}")
    check("origin:     forktrace run" in res.out, f"origin not said\n{res.out}")
    check(f"processes:  {len(run.trace.procs)}," in res.out, f"process count\n{res.out}")
    check("process tree" in res.out and "[exit 0]" in res.out, f"no tree with exits\n{res.out}")
    check(f"events:     {len(run.trace.events)} (" in res.out, f"event count\n{res.out}")
    f = glob.glob(os.path.join(data("v1.1.1_event_kinds"), "*.json.gz"))[0]
    res = t.forktrace(["info", "--tree", f])
    check(res.rc == 0, f"info exit {res.rc}\n  {res.describe()}")
    check("origin:     VizTracer 1.1.1" in res.out and "(C 48, M 4, N 2, O 40, X 899, i 80)"
          in res.out, f"info on VizTracer\n{res.out}")
    with open(t.path("cut.json"), "w") as fh:
        fh.write('{"traceEvents":[{"ph":"X","pid":1,"tid":1,"ts":1,"dur":1,"name":"a"},{"ph"')
    res = t.forktrace(["info", "cut.json"])
    check(res.rc == 1 and "byte 69" in res.out, f"info on a cut file\n  {res.describe()}")


@test
def test_cli(t):
    res = t.forktrace(["combine", "--help"])
    check(res.rc == 0 and "Usage: forktrace combine" in res.out and "--align" in res.out,
          f"combine --help\n  {res.describe()}")
    res = t.forktrace(["info", "--help"])
    check(res.rc == 0 and "Usage: forktrace info" in res.out, f"info --help\n  {res.describe()}")
    res = t.forktrace(["--help"])
    check("combine" in res.out and "info" in res.out, "main usage lacks the commands")
    for args in (["combine", "x.json"], ["combine", "-o", "o.json"],
                 ["combine", "--level", "0", "x.json", "-o", "o.json"], ["info"]):
        res = t.forktrace(args)
        check(res.rc == 2, f"{args}: exit {res.rc}, expected 2\n  {res.describe()}")
    check(not os.path.exists(t.path("o.json")), "a usage error wrote output")
    res = t.forktrace(["combine", "missing.json", "-o", "o.json"])
    check(res.rc == 1 and "missing.json" in res.err, f"missing input\n  {res.describe()}")
    f = glob.glob(os.path.join(data("v1.1.1_event_kinds"), "*.json.gz"))[0]
    res = t.forktrace(["combine", "-q", f, "-o", "o.json.gz", "--level", "1"])
    check(res.rc == 0 and res.stderr == b"", f"-q\n  {res.describe()}")
    check(open(t.path("o.json.gz"), "rb").read(2) == b"\x1f\x8b", "not gzip")
    same_events(ft.load_json(t.path("o.json.gz"))["traceEvents"], in_events([f]), "gzip output")


@test
def test_report_header(t):
    """`forktrace report t.json` shows the header `forktrace run --report` showed."""
    t.run(["sh", "-c", "exit 3"], opts=["--report", "a.html"], out="t.json", expect_rc=3)
    res = t.forktrace(["report", "t.json", "-o", "b.html"])
    check(res.rc == 0, f"report exit {res.rc}\n  {res.describe()}")
    a, b = ft.report_meta(t.path("a.html")), ft.report_meta(t.path("b.html"))
    check(a["exit_status"] == 3 and a["command"] == ["sh", "-c", "exit 3"] and a["host"],
          f"run --report header: {a}")
    # All but what says how the page was made (origin, the input files).
    for key in sorted(set(a) | set(b)):
        if key in ("origin", "inputs"):
            continue
        check(a.get(key) == b.get(key), f"header field {key}: run --report has {a.get(key)!r}, "
              f"report t.json has {b.get(key)!r}")
    check(b["origin"] == "forktrace combine" and b["inputs"] == ["t.json"], f"report: {b}")


@test
def test_run_report_one_walk(t):
    """run -o TRACE --report REPORT writes both from one walk of the model:
    the report counts the processes, threads and events the trace holds."""
    run = t.run([prog("fork_tree")], opts=["--report", "a.html"], out="t.json")
    doc = ft.load_json(t.path("t.json"))
    meta = ft.report_meta(t.path("a.html"))
    events = doc["traceEvents"]
    procs = sum(1 for e in events if e.get("name") == "forktrace_process")
    threads = {(e["pid"], e["tid"]) for e in events if e.get("name") == "thread_name"}
    check(procs > 1 and meta["processes"] == procs == doc["otherData"]["forktrace"]["processes"],
          f"processes: report {meta['processes']}, trace {procs}")
    check(meta["events"] == len(events), f"events: report {meta['events']}, trace {len(events)}")
    check(meta["threads"] == len(threads), f"threads: report {meta['threads']}, trace {len(threads)}")
    check(meta["origin"] == "forktrace run" and meta["inputs"] == [] and
          meta["command"] == run.trace.meta["command"], f"report header: {meta}")


@test
def test_run_metadata(t):
    """host, command and exit status of the inputs: carried when they agree,
    else left empty; listed per input."""
    run = t.run(["sh", "-c", "exit 3"], out="run.json", expect_rc=3)
    want = {k: run.trace.meta[k] for k in ("host", "command", "exit_status")}
    res = combine(t, ["run.json"])
    meta = res.doc["otherData"]["forktrace"]
    check({k: meta[k] for k in want} == want, f"one input: {meta}")
    check(meta["inputs"] == [dict(path="run.json", **want)], f"inputs: {meta['inputs']}")
    # The same run twice agrees; a combined trace as input still says it.
    res = combine(t, ["run.json", "run.json"], out="twice.json")
    meta = res.doc["otherData"]["forktrace"]
    check({k: meta[k] for k in want} == want, f"two equal inputs: {meta}")
    res = combine(t, ["twice.json"], out="again.json")
    meta = res.doc["otherData"]["forktrace"]
    check({k: meta[k] for k in want} == want, f"a combined input: {meta}")
    # Another host and status: nothing at the top, each input's listed.
    doc = ft.load_json(t.path("run.json"))
    doc["otherData"]["forktrace"].update(host="elsewhere", exit_status=0)
    with open(t.path("other.json"), "w") as f:
        json.dump(doc, f)
    res = combine(t, ["run.json", "other.json"], out="mixed.json")
    meta = res.doc["otherData"]["forktrace"]
    check(meta["host"] is None and meta["exit_status"] == 0 and meta["command"] == want["command"],
          f"disagreeing inputs: {meta}")
    check([(i.get("host"), i.get("exit_status")) for i in meta["inputs"]] ==
          [(want["host"], 3), ("elsewhere", 0)], f"per input: {meta['inputs']}")
    res = t.forktrace(["report", "run.json", "other.json", "-o", "mixed.html"])
    check(res.rc == 0, f"report exit {res.rc}\n  {res.describe()}")
    m = ft.report_meta(t.path("mixed.html"))
    check(m["host"] is None and m["exit_status"] is None, f"mixed report header: {m}")
    # An input without run metadata (VizTracer) leaves it open too.
    viz = glob.glob(os.path.join(data("v1.1.1_event_kinds"), "*.json.gz"))[0]
    res = combine(t, ["run.json", viz], out="viz.json")
    meta = res.doc["otherData"]["forktrace"]
    check(meta["host"] is None and meta["command"] is None, f"with VizTracer: {meta}")
    check(meta["inputs"][1] == {"path": viz}, f"VizTracer input: {meta['inputs'][1]}")


# ---- flow and async ids ---------------------------------------------------

# Events that pair up by id, of every kind the format has: flows (s t f)
# by id as a number, a hex string and another string; flow v2 (bind_id);
# nestable async (b n e) by id and by id2 global/local; legacy async
# (S T p F). ev(pid, ph, name, **more).
def ev(pid, ph, name, ts, **more):
    e = {"ph": ph, "name": name, "cat": "c", "pid": pid, "tid": pid, "ts": ts}
    e.update(more)
    return e


def id_events(pid):
    return [
        ev(pid, "s", "flow", 1, id=1), ev(pid, "t", "flow", 2, id=1),
        ev(pid, "f", "flow", 3, id=1, bp="e"),
        ev(pid, "s", "flow", 1, id=2), ev(pid, "f", "flow", 4, id=2),
        ev(pid, "s", "hexflow", 1, id="0x1f"), ev(pid, "f", "hexflow", 5, id="0x1f"),
        ev(pid, "s", "strflow", 1, id="req-7"), ev(pid, "f", "strflow", 6, id="req-7"),
        ev(pid, "X", "out", 1, dur=1, bind_id="0xab", flow_out=True),
        ev(pid, "X", "in", 7, dur=1, bind_id="0xab", flow_in=True),
        ev(pid, "b", "async", 1, id=5), ev(pid, "n", "async", 2, id=5),
        ev(pid, "e", "async", 8, id=5),
        ev(pid, "b", "g", 1, id2={"global": "0x9"}), ev(pid, "e", "g", 9, id2={"global": "0x9"}),
        ev(pid, "b", "l", 1, id2={"local": "0x9"}), ev(pid, "e", "l", 9, id2={"local": "0x9"}),
        ev(pid, "S", "legacy", 1, id="42"), ev(pid, "T", "legacy", 2, id="42"),
        ev(pid, "p", "legacy", 3, id="42"), ev(pid, "F", "legacy", 10, id="42"),
        # Ids that name things of the process: not pairing ids, they stay.
        ev(pid, "N", "obj", 1, id="0x1"), ev(pid, "O", "obj", 2, id="0x1", args={"snapshot": {}}),
        ev(pid, "C", "ctr", 1, id=3, args={"v": 1}),
    ]


def id_of(e):
    """(field, id) of the pairing id of an event, or None."""
    if "bind_id" in e:
        return ("bind_id", e["bind_id"])
    if "id2" in e:
        k = next(iter(e["id2"]))
        return ("id2." + k, e["id2"][k])
    if "id" in e:
        return ("id", e["id"])
    return None


def ids_by_input(events, pids):
    """For the events of pids: {(name, ph, ts): (field, id)}."""
    return {(e["name"], e["ph"], e["ts"]): id_of(e) for e in events
            if e.get("pid") in pids and id_of(e) is not None}


@test
def test_flow_ids(t):
    """Two inputs that use the same flow and async ids: after combine the
    ids of one never meet those of the other, and each file's own pairs
    still match."""
    files = []
    for i, pid in enumerate((100, 200, 300)):
        files.append(f"in{i}.json")
        with open(t.path(files[-1]), "w") as f:
            json.dump({"traceEvents": id_events(pid)}, f)
    res = combine(t, files)
    check(len(res.events) == 3 * len(id_events(1)), f"{len(res.events)} events out")
    got = [ids_by_input(res.events, {pid}) for pid in (100, 200, 300)]
    want = ids_by_input(id_events(100), {100})
    check(all(set(g) == set(want) for g in got), f"events with ids: {got}")
    stays = {"obj", "ctr", "l"}  # process-scoped ids, and id2 local
    for g in got:
        for k, (field, v) in g.items():
            if k[0] in stays:
                check((field, v) == want[k], f"{k}: the id of {field} changed: {want[k]} -> {v}")
    # Each file keeps its pairs: same id in, same id out; different in, different out.
    for g in got:
        for a in want:
            for b in want:
                check((want[a] == want[b]) == (g[a] == g[b]),
                      f"{a} and {b}: ids {want[a]}, {want[b]} became {g[a]}, {g[b]}")
    # No pairing id of one file is one of another file's.
    for i in range(3):
        for j in range(i + 1, 3):
            a = {v for k, v in got[i].items() if k[0] not in stays}
            b = {v for k, v in got[j].items() if k[0] not in stays}
            check(not (a & b), f"inputs {i} and {j} share ids {a & b}")
    # Still what Perfetto reads: numbers stay numbers, hex strings hex.
    for g in got[1:]:
        check(isinstance(g[("flow", "s", 1)][1], int), f"numeric id: {g}")
        check(re.fullmatch(r"0x[0-9a-f]+", g[("hexflow", "s", 1)][1]) and
              re.fullmatch(r"0x[0-9a-f]+", g[("out", "X", 1)][1]) and
              re.fullmatch(r"[0-9a-f]+", g[("legacy", "S", 1)][1]), f"hex ids: {g}")
    # One input has nobody to collide with: nothing changes.
    res = combine(t, files[:1], out="one.json")
    same_events(res.events, id_events(100), "one input")
    # The same pids in both files: the pid remap and the id remap together.
    res = combine(t, [files[0], files[0]], out="twice.json")
    pids = sorted({e["pid"] for e in res.events})
    check(len(pids) == 2 and pids[1] >= REMAP_BASE, f"pids {pids}")
    a, b = (ids_by_input(res.events, {p}) for p in pids)
    check(not ({v for k, v in a.items() if k[0] not in stays} &
               {v for k, v in b.items() if k[0] not in stays}), f"shared ids: {a} {b}")


@test
def test_fork_flow_ids(t):
    """forktrace run's fork arrows (ids 1, 2, ...) of two runs combined:
    each arrow still ends in its own run's child."""
    run = t.run([prog("fork_tree")], out="run.json", expect_rc=0)
    n = len(run.trace.flows("s"))
    check(n >= 2, f"fork_tree has {n} fork arrows")
    res = combine(t, ["run.json", "run.json"], out="twice.json")
    tr = ft.Trace(res.doc, t.path("twice.json"))
    starts, ends = tr.flows("s"), tr.flows("f")
    check(len(starts) == 2 * n and len({e["id"] for e in starts}) == 2 * n,
          f"fork arrow ids of the two runs: {sorted(e['id'] for e in starts)}")
    for p in tr.procs.values():
        parent = tr.parent_of(p)
        if parent is not None and p.rec.get("spawn"):
            ft.assert_flow(tr, parent, p, p.rec["spawn"])
    first = {e["id"] for e in starts if e["pid"] < REMAP_BASE}
    for e in ends:
        check((e["id"] in first) == (e["pid"] < REMAP_BASE),
              f"a fork arrow crosses from one run to the other: {e}")


# ---- top-level keys ---------------------------------------------------------

def top_level(doc):
    return {k: v for k, v in doc.items() if k not in ("traceEvents", "otherData")}


def inputs_top(doc):
    return [i.get("top_level") for i in doc["otherData"]["forktrace"]["inputs"]]


@test
def test_top_level_viztracer(t):
    """file_info and viztracer_metadata of real VizTracer files survive."""
    files = sorted(glob.glob(os.path.join(data("v1.1.1_cli_pid_suffix_8proc"), "*.json.gz")))
    docs = [read_doc(f) for f in files]
    res = combine(t, files)
    check(res.doc.get("file_info") == docs[0]["file_info"] and
          res.doc.get("viztracer_metadata") == docs[0]["viztracer_metadata"],
          f"top-level keys {sorted(res.doc)}")
    check(all(d["file_info"] == docs[0]["file_info"] for d in docs), "the 8 files differ")
    check(inputs_top(res.doc) == [None] * 8 and "differ" not in res.err,
          f"equal values kept once\n  {res.describe()}")
    # Two files with different file_info: the first at the top, the
    # second's in its input entry, and a warning.
    files = sorted(glob.glob(os.path.join(data("v1.1.1_combined_forkheavy"), "*.json.gz")))
    docs = [read_doc(f) for f in files]
    check(docs[0]["file_info"] != docs[1]["file_info"], "the fork-heavy files agree")
    res = combine(t, files, out="fh.json.gz")
    check(res.doc["file_info"] == docs[0]["file_info"], "file_info is not the first input's")
    check(inputs_top(res.doc) == [None, {"file_info": docs[1]["file_info"]}],
          f"the second input's file_info: {str(inputs_top(res.doc))[:300]}")
    check(re.search(r"warning: the inputs differ in top-level file_info\b", res.err),
          f"no warning\n  {res.describe()}")


def write_doc(t, name, events, **keys):
    doc = {"traceEvents": events}
    doc.update(keys)
    with open(t.path(name), "w") as f:
        json.dump(doc, f)
    return name


@test
def test_top_level_keys(t):
    """Unknown top-level keys: kept once when the inputs agree, the first
    one at the top and the others per input when they differ; another
    tool's otherData members; displayTimeUnit; big values."""
    big = "x" * (1 << 20)          # past what is compared in memory
    huge = "y" * (17 << 20)        # past READER_MAX_EVENT: not kept
    a = write_doc(t, "a.json", [ev(1, "X", "a", 1, dur=1)], displayTimeUnit="ns",
                  stackFrames={"1": {"name": "main"}}, same=[1, 2], big=big, bigsame=big,
                  sysTraceEvents="a\n", otherData={"version": "v1", "forktrace_x": 1})
    b = write_doc(t, "b.json", [ev(2, "X", "b", 1, dur=1)], displayTimeUnit="ns",
                  same=[1, 2], big=big + "b", bigsame=big, only_b={"k": None},
                  sysTraceEvents="b\n", otherData={"version": "v2"})
    res = combine(t, [a, b])
    want_top = {"displayTimeUnit": "ns", "stackFrames": {"1": {"name": "main"}}, "same": [1, 2],
                "big": big, "bigsame": big, "sysTraceEvents": "a\n", "only_b": {"k": None}}
    check(top_level(res.doc) == want_top, f"top level: {str(top_level(res.doc))[:400]}")
    other = {k: v for k, v in res.doc["otherData"].items() if k != "forktrace"}
    check(other == {"version": "v1", "forktrace_x": 1}, f"otherData: {other}")
    check(inputs_top(res.doc) == [None, {"big": big + "b", "sysTraceEvents": "b\n",
                                          "otherData": {"version": "v2"}}],
          f"per input: {str(inputs_top(res.doc))[:400]}")
    check(re.search(r"differ in top-level big, sysTraceEvents, otherData.version:", res.err),
          f"warning\n  {res.describe()}")
    # displayTimeUnit: one input that says nothing means the default, "ms".
    c = write_doc(t, "c.json", [ev(3, "X", "c", 1, dur=1)], huge=huge, dup=1,
                  otherData="not an object")
    with open(t.path(c), "r+") as f:   # a key twice: the first is kept
        text = f.read()
        f.seek(0)
        f.write(text.replace('"dup": 1', '"dup": 1, "dup": 2'))
    res = combine(t, [a, c], out="ac.json", expect_rc=1)
    check(re.search(r"warning: c.json: top-level keys not kept .*: huge, dup$", res.err, re.M),
          f"no warning for the keys not kept\n  {res.describe()}")
    check(res.doc["displayTimeUnit"] == "ms" and "huge" not in res.doc and res.doc["dup"] == 1,
          f"top level: {sorted(res.doc)} {res.doc.get('displayTimeUnit')} {res.doc.get('dup')}")
    check(inputs_top(res.doc)[0] == {"displayTimeUnit": "ns"} and
          inputs_top(res.doc)[1] == {"otherData": "not an object"},
          f"per input: {str(inputs_top(res.doc))[:400]}")
    check("displayTimeUnit" in res.err, f"no warning for displayTimeUnit\n  {res.describe()}")
    # One input: everything as it was.
    res = combine(t, [b], out="b-out.json")
    doc_b = json.load(open(t.path(b)))
    check(top_level(res.doc) == top_level(doc_b) and
          res.doc["otherData"]["version"] == "v2", f"one input: {sorted(res.doc)}")
    # otherData twice, an object and not: one kept, and no key twice.
    with open(t.path("od.json"), "w") as f:
        f.write('{"otherData":{"version":"v9"},"traceEvents":[],"otherData":"s"}')
    res = combine(t, [a, "od.json"], out="od-out.json", expect_rc=1)
    check(inputs_top(res.doc)[1] == {"otherData": {"version": "v9"}} and
          re.search(r"od.json: top-level key not kept .*: otherData$", res.err, re.M),
          f"per input: {inputs_top(res.doc)}\n  {res.describe()}")
    # A value that is not valid JSON: not kept, the events after it are.
    with open(t.path("bad.json"), "w") as f:
        f.write('{"bad": [1,,2], "traceEvents":[{"ph":"i","pid":7,"tid":7,"ts":1,"name":"e"}]}')
    res = combine(t, ["bad.json"], out="bad-out.json", expect_rc=1)
    check("bad" not in res.doc and len(res.events) == 1 and
          re.search(r"bad.json: top-level key not kept .*: bad$", res.err, re.M),
          f"invalid value\n  {res.describe()}")
    # Invalid UTF-8 in a value: repaired, and said.
    with open(t.path("u.json"), "wb") as f:
        f.write(b'{"note":"caf\xe9","traceEvents":[]}')
    res = combine(t, ["u.json"], out="u-out.json", expect_rc=1)
    check(res.doc["note"] == "caf\ufffd", f"repaired value {res.doc.get('note')!r}")


if __name__ == "__main__":
    ft.main()
