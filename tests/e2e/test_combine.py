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
    ts_a = {canon({k: v for k, v in e.items() if k != "ts"}): e.get("ts")
            for e in a["traceEvents"]}
    b_pids = {e["pid"] for e in b["traceEvents"]}
    for e in res.events:
        if e["pid"] in b_pids and "ts" in e:
            orig = next(x for x in b["traceEvents"]
                        if canon({k: v for k, v in x.items() if k != "ts"}) ==
                        canon({k: v for k, v in e.items() if k != "ts"}))
            check(abs(e["ts"] - (orig["ts"] + 5_000_000)) < 0.0015,
                  f"b's event not shifted by 5 s: {orig['ts']} -> {e['ts']}")
        elif e["pid"] not in b_pids and canon({k: v for k, v in e.items() if k != "ts"}) in ts_a:
            check(e.get("ts") == ts_a[canon({k: v for k, v in e.items() if k != "ts"})],
                  f"a's event moved: {e}")
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
    res = t.forktrace(["info", "run.json"])
    check(res.rc == 0, f"info exit {res.rc}\n  {res.describe()}")
    check("origin:     forktrace run" in res.out, f"origin not said\n{res.out}")
    check(f"processes:  {len(run.trace.procs)}," in res.out, f"process count\n{res.out}")
    check("process tree" in res.out and "[exit 0]" in res.out, f"no tree with exits\n{res.out}")
    check(f"events:     {len(run.trace.events)} (" in res.out, f"event count\n{res.out}")
    f = glob.glob(os.path.join(data("v1.1.1_event_kinds"), "*.json.gz"))[0]
    res = t.forktrace(["info", f])
    check(res.rc == 0, f"info exit {res.rc}\n  {res.describe()}")
    check("origin:     VizTracer 1.1.1" in res.out and "(C 48, M 4, N 2, O 40, X 899, i 80)"
          in res.out and "file_info" in res.out, f"info on VizTracer\n{res.out}")
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


def page_meta(path):
    """The run header data ("meta") embedded in an HTML report."""
    with open(path, encoding="utf-8") as f:
        html = f.read()
    m = re.search(r'<script type="application/json" id="ft-data">(.*?)</script>', html, re.S)
    check(m, f"{path}: no embedded data")
    return json.loads(m.group(1))["meta"]


@test
def test_report_header(t):
    """`forktrace report t.json` shows the header `forktrace run --report` showed."""
    t.run(["sh", "-c", "exit 3"], opts=["--report", "a.html"], out="t.json", expect_rc=3)
    res = t.forktrace(["report", "t.json", "-o", "b.html"])
    check(res.rc == 0, f"report exit {res.rc}\n  {res.describe()}")
    a, b = page_meta(t.path("a.html")), page_meta(t.path("b.html"))
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
    m = page_meta(t.path("mixed.html"))
    check(m["host"] is None and m["exit_status"] is None, f"mixed report header: {m}")
    # An input without run metadata (VizTracer) leaves it open too.
    viz = glob.glob(os.path.join(data("v1.1.1_event_kinds"), "*.json.gz"))[0]
    res = combine(t, ["run.json", viz], out="viz.json")
    meta = res.doc["otherData"]["forktrace"]
    check(meta["host"] is None and meta["command"] is None, f"with VizTracer: {meta}")
    check(meta["inputs"][1] == {"path": viz}, f"VizTracer input: {meta['inputs'][1]}")


if __name__ == "__main__":
    ft.main()
