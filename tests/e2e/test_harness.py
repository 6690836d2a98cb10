#!/usr/bin/python3
"""Self-test of the e2e harness, without forktrace: the checkers must pass
on a correct hand-written trace (fake_trace.json, and synthetic traces)
and must FAIL on each broken variant. A checker that cannot fail tests
nothing; this is where that is caught."""

import copy
import gzip
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ftcheck as ft  # noqa: E402
from ftcheck import check, test  # noqa: E402
import test_format  # noqa: E402
import test_progs  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
FAKE = os.path.join(HERE, "fake_trace.json")
FAKE_ARGS = dict(prog_path="/fake/progs/fork_true", cwd="/fake/cwd", host="fakehost",
                 ft_pid=999, t0_ns=5000000000000 - 10**6, t1_ns=5000002000000 + 10**6,
                 now_real_ns=1700000000000000000 + 10**9)


def must_fail(what, fn, *args, **kw):
    try:
        fn(*args, **kw)
    except AssertionError:
        return
    ft.fail(f"the checker accepted a broken trace: {what}")


def fake_doc():
    return ft.load_json(FAKE)


def events(doc, **match):
    return [e for e in doc["traceEvents"] if all(e.get(k) == v for k, v in match.items())]


def record(doc, pid):
    return events(doc, ph="M", name="forktrace_process", pid=pid)[0]["args"]


@test
def test_harness_format(t):
    with open(FAKE, encoding="utf-8") as f:
        raw = f.read()
    test_format.check_fork_true(fake_doc(), raw_text=raw, **FAKE_ARGS)

    def mutated(fn):
        d = fake_doc()
        fn(d)
        return d

    cases = {
        "child exit code 1": lambda d: record(d, 1001).update(exit={"kind": "code", "code": 1}),
        "child record missing": lambda d: d["traceEvents"].remove(
            events(d, ph="M", name="forktrace_process", pid=1001)[0]),
        "child without parent": lambda d: record(d, 1001).update(parent=-1),
        "spawn vfork": lambda d: record(d, 1001).update(spawn="vfork"),
        "child not instrumented": lambda d: record(d, 1001).update(instrumented=False),
        "images 1": lambda d: record(d, 1001).update(images=1),
        "argv missing": lambda d: record(d, 1000).pop("argv"),
        "flow ids differ": lambda d: events(d, ph="f")[0].update(id=2),
        "no wait mark": lambda d: d["traceEvents"].remove(events(d, ph="i", cat="wait")[0]),
        "wait mark exit wrong": lambda d: events(d, ph="i", cat="wait")[0]["args"].update(
            exit={"kind": "signal", "signal": 9, "name": "SIGKILL"}),
        "exit on first image": lambda d: events(d, ph="X", pid=1001, name="fork_true")[0][
            "args"].update(exit={"kind": "code", "code": 0}),
        "lost events": lambda d: d["otherData"]["forktrace"].update(lost_events=1),
        "wrong origin": lambda d: d["otherData"]["forktrace"].update(origin="combine"),
        "ts in ns": lambda d: events(d, ph="s")[0].update(ts=5000000200000),
        "thread name": lambda d: events(d, ph="M", name="thread_name", pid=1000)[0][
            "args"].update(name="main"),
        "sort order": lambda d: events(d, ph="M", name="process_sort_index", pid=1001)[0][
            "args"].update(sort_index=-1),
        "displayTimeUnit": lambda d: d.update(displayTimeUnit="ns"),
        "no process_labels": lambda d: d["traceEvents"].remove(
            events(d, ph="M", name="process_labels", pid=1000)[0]),
    }
    for what, fn in cases.items():
        must_fail(what, test_format.check_fork_true, mutated(fn), **FAKE_ARGS)
    with open(FAKE, encoding="utf-8") as f:
        raw = f.read()
    must_fail("four decimals", test_format.check_decimals,
              raw.replace("5000000500.125", "5000000500.1255"))
    dup = t.path("dup.json")
    with open(dup, "w") as f:
        f.write(raw.replace('"version": "0.1.0",', '"version": "0.1.0", "version": "0.1.0",'))
    must_fail("duplicate key", ft.load_json, dup)
    gz = t.path("fake.json.gz")
    with open(gz, "wb") as f:
        f.write(gzip.compress(raw.encode()))
    test_format.check_fork_true(ft.load_json(gz), **FAKE_ARGS)


def synth(procs, meta_extra=None):
    """A trace document from process specs (dicts with pid, parent, name,
    argv, exit, spawn, threads), with the events the format describes."""
    evs, fid = [], 0
    t = 1000.0
    for p in procs:
        pid = p["pid"]
        rec = {"pid": pid, "ppid": p.get("ppid", p["parent"] if p["parent"] > 0 else 1),
               "parent": p["parent"], "start_ticks": 1, "name": p["name"],
               "exe": "/x/" + p["name"], "argv": p.get("argv", [p["name"]]), "cwd": "/x",
               "start_ns": 1, "end_ns": 2, "spawn": p.get("spawn"), "exit": p["exit"],
               "instrumented": p.get("instrumented", True), "images": 1, "lost_events": 0}
        evs.append({"ph": "M", "name": "forktrace_process", "pid": pid, "tid": pid, "args": rec})
        evs.append({"ph": "M", "name": "process_name", "pid": pid, "tid": pid,
                    "args": {"name": p["name"]}})
        for tid, tname in p.get("threads", {pid: p["name"]}).items():
            evs.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                        "args": {"name": tname}})
        evs.append({"ph": "X", "cat": "process", "name": p["name"], "pid": pid, "tid": pid,
                    "ts": t, "dur": 1.0, "args": {"image": 0, "instrumented": True,
                                                   "exit": p["exit"]}})
        if p["parent"] > 0:
            fid += 1
            kind = p.get("spawn") or "fork"
            evs.append({"ph": "s", "cat": "fork", "name": kind, "id": fid, "pid": p["parent"],
                        "tid": p["parent"], "ts": t})
            evs.append({"ph": "f", "bp": "e", "cat": "fork", "name": kind, "id": fid,
                        "pid": pid, "tid": pid, "ts": t})
            evs.append({"ph": "i", "s": "t", "cat": "wait", "name": "wait", "pid": p["parent"],
                        "tid": p["parent"], "ts": t, "args": {"child": pid, "exit": p["exit"]}})
        t += 1.0
    meta = {"processes": len(procs), "lost_events": 0, "exit_status": 0}
    meta.update(meta_extra or {})
    return {"displayTimeUnit": "ms", "otherData": {"forktrace": meta}, "traceEvents": evs}


def fork_tree_procs():
    procs = [{"pid": 100, "parent": -1, "name": "fork_tree", "exit": {"kind": "code", "code": 0}}]
    code_pid = {0: 100}
    nxt = 101
    for code, kids in test_progs.FORK_TREE_EDGES.items():
        for k in kids:
            procs.append({"pid": nxt, "parent": code_pid[code], "name": "fork_tree",
                          "spawn": "fork", "exit": {"kind": "code", "code": k}})
            code_pid[k] = nxt
            nxt += 1
    return procs


@test
def test_harness_helpers(t):
    tr = ft.Trace(synth(fork_tree_procs()))
    test_progs.check_fork_tree(tr)
    root = tr.root()
    ft.assert_count(tr.descendants(root), 14, "descendants")
    leaf = tr.one(pred=lambda p: p.exit.get("code") == 17)
    check([a.exit["code"] for a in tr.ancestors(leaf)] == [33, 21, 0], "ancestors")
    check("fork_tree" in tr.dump(), "dump")
    must_fail("assert_exit", ft.assert_exit, leaf, code=16)
    must_fail("assert_exit signal", ft.assert_exit, leaf, signal=9)
    must_fail("assert_parent", ft.assert_parent, leaf, root)
    must_fail("one() with many", tr.one, name="fork_tree")

    # Two leaves swapped between parents: every count is right, the edges are not.
    procs = fork_tree_procs()
    a = next(p for p in procs if p["exit"].get("code") == 10)
    b = next(p for p in procs if p["exit"].get("code") == 12)
    a["parent"], b["parent"] = b["parent"], a["parent"]
    must_fail("swapped leaves", test_progs.check_fork_tree, ft.Trace(synth(procs)))
    procs = fork_tree_procs()
    procs.pop()
    must_fail("a missing leaf", test_progs.check_fork_tree, ft.Trace(synth(procs)))
    procs = fork_tree_procs()
    procs[5]["exit"] = {"kind": "signal", "signal": 9, "name": "SIGKILL"}
    must_fail("a killed node", test_progs.check_fork_tree, ft.Trace(synth(procs)))

    # check_common on a Result built by hand.
    doc = synth(fork_tree_procs())
    path = t.path("tree.json")
    with open(path, "w") as f:
        json.dump(doc, f)

    def result(stderr, rc=0):
        r = ft.Result(["forktrace"], rc, b"", stderr, 0.1, t.dir, path, 1)
        r.trace = ft.load_trace(path)
        return r

    good = f"forktrace: 15 processes, 99 events, 0 lost, trace written to {path}\n".encode()
    ft.check_common(result(good))
    must_fail("no summary", ft.check_common, result(b""))
    must_fail("summary with loss", ft.check_common, result(good.replace(b" 0 lost", b" 3 lost")))
    must_fail("summary count", ft.check_common, result(good.replace(b"15 proc", b"14 proc")))
    must_fail("exit status", ft.check_common, result(good, rc=1))
    must_fail("summary with -q", ft.check_common, result(good), quiet=True)
    ft.check_common(result(b""), quiet=True)
    r = result(b"some output\n" + good)
    check(r.command_stderr() == b"some output\n", f"command_stderr {r.command_stderr()!r}")
    bad = copy.deepcopy(doc)
    bad["traceEvents"][0]["args"]["exit"] = {"kind": "running"}
    with open(path, "w") as f:
        json.dump(bad, f)
    must_fail("running process", ft.check_common, result(good))
    bad = copy.deepcopy(doc)
    bad["traceEvents"].append({"ph": "i", "name": "x", "pid": 4242, "tid": 4242, "ts": 1})
    with open(path, "w") as f:
        json.dump(bad, f)
    must_fail("event of an unknown process", ft.check_common, result(good))
    bad = copy.deepcopy(doc)
    twin = copy.deepcopy(bad["traceEvents"][0])
    twin["pid"] = twin["tid"] = 4194304  # an out_pid: host pid 100 recorded twice
    bad["traceEvents"].append(twin)
    bad["otherData"]["forktrace"]["processes"] = 16
    with open(path, "w") as f:
        json.dump(bad, f)
    must_fail("one process recorded twice", ft.check_common,
              result(good.replace(b"15 proc", b"16 proc")))

    # Leftover detection: a process started in the test directory is found.
    sleeper = subprocess.Popen(["sleep", "30"], cwd=t.dir)
    try:
        left = ft.leftover_processes(t.dir)
        check(any(x.split()[0] == str(sleeper.pid) for x in left), f"leftovers {left}")
    finally:
        sleeper.kill()
        sleeper.wait()
    check(not ft.leftover_processes(t.dir), "leftover after kill")

    # wait_until returns what the condition gave once it holds; it fails,
    # naming what it waited for, at its deadline or when forktrace ended.
    calls = []

    def third_call():
        calls.append(1)
        return len(calls) >= 3 and "ok"
    got = ft.wait_until(third_call, "three calls")
    check(got == "ok" and len(calls) == 3, f"wait_until gave {got!r} after {len(calls)} calls")
    ended = (subprocess.Popen(["true"], stderr=subprocess.PIPE),)
    for kw, says in (({"timeout": 0.05}, "timed out after 0.05 s waiting for nothing"),
                     ({"started": ended}, "forktrace ended (rc 0) while waiting for nothing")):
        try:
            ft.wait_until(lambda: False, "nothing", **kw)
        except AssertionError as e:
            check(says in str(e), f"wait_until({kw}) failed with {e}, expected {says!r}")
        else:
            ft.fail(f"wait_until({kw}) returned")


if __name__ == "__main__":
    ft.main()
