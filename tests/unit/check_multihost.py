#!/usr/bin/python3
"""Checks the traces test_multihost writes of the multi-host fixture
(tests/unit/model_fixture.c: build_head_model, build_node2_part,
build_node3_part) against docs/TRACE_FORMAT.md, "Multi-host runs".

Usage: check_multihost.py run|again|offline|tools|ftnode FILE

ftnode (FT_BIN): FILE, the head's trace file, combined with both parts
node-output files beside it (multihost_node2.ftnode, multihost_node3.ftnode).
tools (FT_BIN: the forktrace binary): FILE, the run's trace, as HDF5
(`forktrace combine -o .h5`, read with h5py), that file read back
(`forktrace combine` of it to JSON) and `forktrace info` of both.

run: the head's model and both parts, as `forktrace run` writes them.
again: that trace combined again (its hosts, ranks, parents kept).
offline: node3's part combined with the head's trace file (no samples:
realtime anchors). Exits non-zero with a message on the first mismatch.
"""
import collections
import json
import os
import subprocess
import sys

S = 1_000_000_000
REMAP = 4194304


def eq(what, got, want):
    if got != want:
        raise AssertionError(f"{what}: got {got!r}, want {want!r}")


def near(what, got_ns, want_ns, tol_ns=1000):
    if abs(got_ns - want_ns) > tol_ns:
        raise AssertionError(f"{what}: {got_ns} ns, want {want_ns} ns within {tol_ns} ns "
                             f"(off by {got_ns - want_ns})")


def ns(us):
    return round(us * 1000)


def meta(doc, name):
    out = {}
    for ev in doc["traceEvents"]:
        if ev["ph"] == "M" and ev["name"] == name:
            out[ev["pid"]] = ev["args"]
    return out


def check_flows(doc):
    """Every flow start has one end with its id, and the remote ones."""
    starts = collections.Counter(e["id"] for e in doc["traceEvents"] if e["ph"] == "s")
    ends = collections.Counter(e["id"] for e in doc["traceEvents"] if e["ph"] == "f")
    eq("flow ids", starts, ends)
    assert all(n == 1 for n in starts.values()), f"a flow id twice: {starts}"
    return {(e["pid"], e["ph"]): e for e in doc["traceEvents"]
            if e["ph"] in "sf" and e["name"] == "remote"}


def check_run(doc, combined):
    fp = meta(doc, "forktrace_process")
    n2root, n2r0, n3root = REMAP, REMAP + 1, REMAP + 2
    # Equal pids on three hosts: three processes, each on its host.
    eq("pids", sorted(fp), [100, 150, 200, 201, 300, 400, n2root, n2r0, n3root])
    eq("hosts of the processes", {p: a["host"] for p, a in fp.items()},
       {100: "head", 200: "head", 300: "head", 400: "head", n2root: "node2", n2r0: "node2",
        201: "node2", n3root: "node3", 150: "node3"})
    eq("host pids", {p: a["pid"] for p, a in fp.items()},
       {100: 100, 200: 200, 300: 300, 400: 400, n2root: 100, n2r0: 200, 201: 201,
        n3root: 100, 150: 150})
    # A node's root is a child of its launcher, the ssh on the head.
    eq("parents", {p: a["parent"] for p, a in fp.items()},
       {100: -1, 200: 100, 300: 100, 400: 100, n2root: 200, n2r0: n2root, 201: n2root,
        n3root: 300, 150: n3root})
    eq("ppid of node2's root", fp[n2root]["ppid"], 200)
    eq("ppid of node3's root", fp[n3root]["ppid"], 300)
    # Ranks.
    eq("ranks", {p: (a.get("rank"), a.get("local_rank"), a.get("rank_var"))
                 for p, a in fp.items() if "rank" in a},
       {n2r0: (0, 0, "OMPI_COMM_WORLD_RANK"), 201: (1, 1, "OMPI_COMM_WORLD_RANK"),
        150: (2, 0, "PMIX_RANK")})
    labels = meta(doc, "process_labels")
    eq("label of rank 0", labels[n2r0]["labels"], "rank 0, node2, ./app")
    eq("label of the head's root", labels[100]["labels"], "head, bash job.sh")
    # node2's clock: head = node + 1000 s + 50 ppm * (node - 1002 s).
    near("node2 root start_ns", fp[n2root]["start_ns"], 2002 * S + S // 2 + 25000)
    near("node2 rank 0 end_ns", fp[n2r0]["end_ns"], 2020 * S + 900000)
    # node3's clock by its anchor: 1500 s behind.
    eq("node3 root start_ns", fp[n3root]["start_ns"], 2002 * S)
    # Host lost, at the time the part stopped.
    for p in (n3root, 150):
        eq(f"exit of {p}", fp[p]["exit"], {"kind": "host_lost"})
        eq(f"end of {p}", fp[p]["end_ns"], 2015 * S)
    eq("exit of node2's rank 0", fp[n2r0]["exit"], {"kind": "code", "code": 0})
    # Every event of a part is on the head's clock, both ends of a slice.
    marks = [e for e in doc["traceEvents"] if e["ph"] == "X" and e["name"] == "system"]
    eq("marks", len(marks), 1)
    near("mark start", ns(marks[0]["ts"]), 2010 * S + 400000)
    near("mark end", ns(marks[0]["ts"] + marks[0]["dur"]), 2014 * S + 600000)
    image = [e for e in doc["traceEvents"] if e["ph"] == "X" and e["pid"] == n2root]
    near("node2 root image", ns(image[0]["ts"]), 2002 * S + S // 2 + 25000)
    # The arrows from each launcher to its node's root.
    remote = check_flows(doc)
    eq("remote arrows", sorted(remote), [(200, "s"), (300, "s"), (n2root, "f"), (n3root, "f")])
    eq("node2 arrow ids", remote[(200, "s")]["id"], remote[(n2root, "f")]["id"])
    near("node2 arrow start", ns(remote[(200, "s")]["ts"]), 2002 * S + S // 2 + 25000)
    eq("node2 arrow tid", remote[(200, "s")]["tid"], 200)
    # Sort indexes: each part's after the head's.
    sort = meta(doc, "process_sort_index")
    eq("sort indexes distinct", len({a["sort_index"] for a in sort.values()}), len(sort))
    assert sort[100]["sort_index"] < sort[n2root]["sort_index"] < sort[n3root]["sort_index"]

    ft = doc["otherData"]["forktrace"]
    eq("origin", ft["origin"], "forktrace combine" if combined else "forktrace run")
    eq("processes", ft["processes"], 9)
    hosts = ft["hosts"]
    eq("host names", [h["name"] for h in hosts], ["head", "node2", "node3", "node4"])
    h = {x["name"]: x for x in hosts}
    eq("head", h["head"], {"name": "head", "role": "head", "state": "complete",
                           "processes": 4, "clock": "reference", "offset_ns": 0, "ref_ns": 0,
                           "drift_ppm": 0, "err_ns": 0, "samples": 0, "launcher": -1})
    n2 = dict(h["node2"])
    drift = n2.pop("drift_ppm")
    assert abs(drift - 50) < 1e-3, f"node2 drift {drift} ppm"
    near("node2 offset at its ref", n2.pop("offset_ns"),
         1000 * S + (n2.pop("ref_ns") - 1002 * S) // 20000)
    # The samples' error (30 us) and the rounding of the line's.
    near("node2 error bound", n2.pop("err_ns"), 30000, 2)
    eq("node2", n2, {"name": "node2", "role": "node", "state": "complete", "processes": 3,
                     "clock": "measured", "samples": 11, "launcher": 200,
                     "launched_as": "node2"})
    eq("node3", h["node3"], {"name": "node3", "role": "node", "state": "lost", "processes": 2,
                             "clock": "realtime anchor", "offset_ns": 1500 * S, "ref_ns": 0,
                             "drift_ppm": 0, "err_ns": -1, "samples": 0,
                             "lost_ns": 2015 * S, "launcher": 300, "launched_as": "node3"})
    eq("node4", h["node4"], {"name": "node4", "role": "node", "state": "missing",
                             "processes": 0, "clock": "none", "offset_ns": 0, "ref_ns": 0,
                             "drift_ppm": 0, "err_ns": -1, "samples": 0,
                             "why": "no node collector joined",
                             "where": "node4:/shared/out/node4-77.ftnode", "launcher": 400,
                             "launched_as": "node4"})
    return doc


def check_offline(doc):
    fp = meta(doc, "forktrace_process")
    root = REMAP
    eq("pids", sorted(fp), [100, 150, 200, 300, 400, root])
    eq("node3 root's parent", fp[root]["parent"], 300)
    eq("node3 root's host", fp[root]["host"], "node3")
    eq("node3 root start_ns", fp[root]["start_ns"], 2002 * S)
    eq("node3 worker's exit", fp[150]["exit"], {"kind": "host_lost"})
    remote = check_flows(doc)
    eq("remote arrows", sorted(remote), [(300, "s"), (root, "f")])
    hosts = doc["otherData"]["forktrace"]["hosts"]
    eq("host names", [h["name"] for h in hosts], ["head", "node3"])
    eq("head's processes", hosts[0]["processes"], 4)
    eq("node3's clock", (hosts[1]["clock"], hosts[1]["offset_ns"], hosts[1]["launcher"]),
       ("realtime anchor", 1500 * S, 300))


def forktrace(*args):
    res = subprocess.run([os.environ["FT_BIN"], *args], capture_output=True, text=True,
                         timeout=60)
    if res.returncode != 0:
        raise AssertionError(f"forktrace {' '.join(args)}: exit {res.returncode}: {res.stderr}")
    return res.stdout


def check_h5(path, run):
    import h5py  # Debian's python3-h5py (scripts/setup-deps)

    with h5py.File(path, "r") as f:
        eq("format_version", int(f.attrs["format_version"]), 3)
        procs = {int(r["pid"]): r for r in f["metadata"]["processes"][:]}
        fp = meta(run, "forktrace_process")
        eq("processes", sorted(procs), sorted(fp))
        for pid, a in fp.items():
            r = procs[pid]
            eq(f"host of {pid}", r["host"].decode(), a["host"])
            eq(f"rank of {pid}", (int(r["rank"]), int(r["local_rank"]), r["rank_var"].decode()),
               (a.get("rank", -1), a.get("local_rank", -1), a.get("rank_var") or ""))
            eq(f"exit kind of {pid}", r["exit_kind"].decode(), a["exit"]["kind"])
            eq(f"end of {pid}", int(r["end_ns"]), a["end_ns"])
            eq(f"parent of {pid}", int(r["parent"]), a["parent"])
        rows = f["metadata"]["hosts"][:]
        want = run["otherData"]["forktrace"]["hosts"]
        eq("hosts rows", len(rows), len(want))
        for r, h in zip(rows, want):
            got = {k: (r[k].decode() if isinstance(r[k], bytes) else r[k].item())
                   for k in r.dtype.names}
            for k in ("why", "where", "launched_as"):
                if got[k] == "":
                    del got[k]
            if got["lost_ns"] == -1:
                del got["lost_ns"]
            # The JSON holds the drift to six digits, the table whole.
            h = dict(h)
            assert abs(got.pop("drift_ppm") - h.pop("drift_ppm")) < 1e-4, f"drift of {h}"
            eq(f"hosts row {h['name']}", got, h)


def check_tools(path):
    """The run's trace through HDF5 and back, and forktrace info."""
    with open(path, "rb") as f:
        run = json.load(f)
    h5 = path.replace(".json", ".h5")
    back = path.replace(".json", "_from_h5.json")
    forktrace("combine", path, "-o", h5)
    check_h5(h5, run)
    forktrace("combine", h5, "-o", back)
    with open(back, "rb") as f:
        doc = json.load(f)
    eq("hosts after HDF5", doc["otherData"]["forktrace"]["hosts"],
       run["otherData"]["forktrace"]["hosts"])
    check_run(doc, True)
    for src in (path, h5):
        out = forktrace("info", "--tree", src)
        for line in ("    head (head): 4 processes, clock reference, complete",
                     "    node2: 3 processes, clock measured (offset +1000.000500 s, "
                     "drift +50.000 ppm, error bound 30.0 us, 11 samples), complete",
                     "    node3: 2 processes, clock realtime anchor (offset +1500.000000 s, "
                     "drift +0.000 ppm, error bound unknown), lost at 2015000.000 ms",
                     "    node4: missing, no node collector joined; its part went to "
                     "node4:/shared/out/node4-77.ftnode",
                     "        4194305 (host pid 200) app on node2 rank 0 [exit 0], 17 s, "
                     "11 events, 1 thread: app (was pid 200 in node2)",
                     "        150 app on node3 rank 2 [host lost at 2015000.000 ms], 12 s, "
                     "8 events, 1 thread: app"):
            if line.rstrip() not in out.splitlines():
                raise AssertionError(f"forktrace info {src}: no line {line!r} in:\n{out}")
        # The summary: each host within 80 columns, its cut after the
        # trace's start (2000 s), the ranks of the three apps.
        out = forktrace("info", src)
        for line in ("  run:         30 s, 9 processes, 3 with a rank (0-2, PMIx)",
                     "    head (head): 4 processes, clock reference, complete",
                     "    node2: 3 processes, clock measured (+/- 30 us), complete",
                     "    node3: 2 processes, clock realtime anchor, lost at +15 s",
                     "  unfinished:  2 cut short by a lost host"):
            if line not in out.splitlines():
                raise AssertionError(f"forktrace info {src}: no line {line!r} in:\n{out}")


def check_ftnode(headf):
    d = os.path.dirname(headf)
    out = os.path.join(d, "multihost_ftnode.json")
    forktrace("combine", headf, os.path.join(d, "multihost_node3.ftnode"),
              os.path.join(d, "multihost_node2.ftnode"), "-o", out)
    with open(out, "rb") as f:
        doc = json.load(f)
    fp = meta(doc, "forktrace_process")
    by = {(a["host"], a["pid"]): (p, a) for p, a in fp.items()}
    eq("processes", sorted(by), sorted([("head", 100), ("head", 200), ("head", 300),
                                        ("head", 400), ("node2", 100), ("node2", 200),
                                        ("node2", 201), ("node3", 100), ("node3", 150)]))
    n2root, a2 = by[("node2", 100)]
    n3root, a3 = by[("node3", 100)]
    eq("node2 root's parent", a2["parent"], 200)
    eq("node3 root's parent", a3["parent"], 300)
    near("node2 root start_ns (measured, from its file)", a2["start_ns"],
         2002 * S + S // 2 + 25000)
    eq("node3 root start_ns (realtime anchor)", a3["start_ns"], 2002 * S)
    eq("node3 worker's exit", by[("node3", 150)][1]["exit"], {"kind": "host_lost"})
    hosts = {h["name"]: h for h in doc["otherData"]["forktrace"]["hosts"]}
    eq("hosts", sorted(hosts), ["head", "node2", "node3"])
    eq("node2's clock", (hosts["node2"]["clock"], hosts["node2"]["samples"]), ("measured", 11))
    eq("node3's clock", hosts["node3"]["clock"], "realtime anchor")
    eq("node3's state", (hosts["node3"]["state"], hosts["node3"]["lost_ns"]), ("lost", 2015 * S))
    # A node-output file alone: its own trace, on the head's clock.
    info = forktrace("info", os.path.join(d, "multihost_node2.ftnode"))
    if "node2: 3 processes, clock measured" not in info:
        raise AssertionError(f"forktrace info of node2's file:\n{info}")
    # node3's part alone has no samples and no head to be aligned to: info
    # says so, and that the part could be placed by its realtime anchor.
    info = forktrace("info", os.path.join(d, "multihost_node3.ftnode"))
    want = "node3: 2 processes, not aligned: no head in this trace; realtime anchor available"
    if want not in info:
        raise AssertionError(f"forktrace info of node3's file, no line {want!r}:\n{info}")


def main():
    mode, path = sys.argv[1], sys.argv[2]
    if mode in ("tools", "ftnode"):
        doc = None
    else:
        with open(path, "rb") as f:
            doc = json.loads(f.read().decode("utf-8"))
    if mode == "run":
        check_run(doc, False)
    elif mode == "again":
        check_run(doc, True)
        with open(path.replace("_again", "_run"), "rb") as f:
            run = json.load(f)
        eq("hosts kept", doc["otherData"]["forktrace"]["hosts"],
           run["otherData"]["forktrace"]["hosts"])
    elif mode == "offline":
        check_offline(doc)
    elif mode == "tools":
        check_tools(path)
    elif mode == "ftnode":
        check_ftnode(path)
    else:
        raise SystemExit(f"unknown mode {mode}")
    print(f"check_multihost.py {mode}: ok")


if __name__ == "__main__":
    main()
