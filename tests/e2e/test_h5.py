#!/usr/bin/python3
"""The HDF5 output (docs/HDF5_LAYOUT.md) of a real run, read with Debian's
h5py: `forktrace run -o t.h5 -- fork_tree` against `-o t.json` of an
identical run (same program names, tree, exit statuses, event count), the
documented dtypes, chunking and compression, strings that resolve, image
slices as regions/<name>/start_times and end_times, h5dump -H, and the
round trip .h5 -> events (reader_h5) -> JSON keeping every event.

FT_H5_TOOL is tests/h5's test_h5 (its `to-json` reads an .h5 back).
"""

import collections
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ftcheck as ft  # noqa: E402
from ftcheck import Skip, check, prog, test  # noqa: E402

COLUMNS = {
    "ts_ns": "int64", "dur_ns": "int64", "name_id": "uint32", "cat_id": "uint32",
    "tid": "int64", "ph": "uint8", "scope": "uint8", "flags": "uint8", "id": "uint64",
    "args_offset": "uint64", "args_length": "uint32", "extra_offset": "uint64",
    "extra_length": "uint32",
}


def h5py_or_skip():
    try:
        import h5py  # noqa: F401
        import numpy  # noqa: F401
    except ImportError as e:
        raise Skip(f"python3-h5py is not installed ({e}): scripts/setup-deps installs it")
    import h5py
    import numpy
    return h5py, numpy


def s(v):
    return v.decode() if isinstance(v, bytes) else v


def tree_signature(rows):
    """(name, exit kind, exit code, parent's exit code) per process: fork_tree's
    exit codes name each node, so this pins the whole tree without pids."""
    by_pid = {r["pid"]: r for r in rows}
    out = collections.Counter()
    for r in rows:
        parent = by_pid.get(r["parent"])
        out[(r["name"], r["exit_kind"], r["exit_code"],
             parent["exit_code"] if parent else None)] += 1
    return out


def json_rows(trace):
    rows = []
    for p in trace.all():
        ex = p.exit or {}
        rows.append({"pid": p.tpid, "parent": p.parent, "name": p.name,
                     "exit_kind": ex.get("kind"), "exit_code": ex.get("code", -1)})
    return rows


@test
def test_h5_output(t):
    h5py, np = h5py_or_skip()
    tool = os.environ.get("FT_H5_TOOL", "")
    check(tool and os.access(tool, os.X_OK), f"FT_H5_TOOL={tool!r} is not executable")

    ref = t.run([prog("fork_tree")], out="t.json", expect_rc=0)
    res = t.forktrace(t.run_args([prog("fork_tree")], out="t.h5"))
    check(res.rc == 0, f"forktrace run -o t.h5 failed\n  {res.describe()}")
    path = t.path("t.h5")
    check(os.path.exists(path), f"no {path}\n  {res.describe()}")
    with open(path, "rb") as f:
        check(f.read(8) == b"\x89HDF\r\n\x1a\n", "t.h5 does not start with the HDF5 signature")
    summary = res.summary_lines()
    check(len(summary) == 1 and summary[0].group(1) == "15", f"summary line: {res.err!r}")
    check(not [x for x in os.listdir(t.dir) if ".tmp-" in x], "temporary output left behind")

    f = h5py.File(path, "r")
    a = f.attrs
    check(a["format"] == "forktrace-hdf5" and a["format_version"] == 2, f"format attrs {dict(a)}")
    meta = ref.trace.meta
    for key in ("origin", "host", "exit_status", "processes", "lost_events"):
        check(a[key] == meta[key], f"root attribute {key}: {a[key]!r}, JSON says {meta[key]!r}")
    check([s(x) for x in a["command"]] == meta["command"], f"command {a['command']!r}")
    check(a["anchor_monotonic_ns"] > 0 and a["anchor_realtime_ns"] > 0, "anchor attributes")
    check(a["start_ns"] <= a["end_ns"], "start_ns > end_ns")

    # /processes: the same tree as the JSON trace of the same program.
    procs = f["processes"][:]
    check(len(procs) == 15, f"{len(procs)} rows in /processes")
    rows = [{"pid": int(r["pid"]), "parent": int(r["parent"]), "name": s(r["name"]),
             "exit_kind": s(r["exit_kind"]), "exit_code": int(r["exit_code"])} for r in procs]
    check(tree_signature(rows) == tree_signature(json_rows(ref.trace)),
          f"process tree differs:\n  h5   {sorted(tree_signature(rows).items())}\n"
          f"  json {sorted(tree_signature(json_rows(ref.trace)).items())}")
    for r in procs:
        check(bool(r["instrumented"]) and int(r["images"]) == 1, f"process row {r}")
        check(s(r["argv"]) == prog("fork_tree") and s(r["exe"]).endswith("fork_tree"), f"argv/exe {r}")
        check(0 < r["start_ns"] <= r["end_ns"], f"lifetime of {r}")
    roots = [r for r in rows if r["parent"] == -1]
    check(len(roots) == 1, f"roots: {roots}")

    threads = f["threads"][:]
    check(len(threads) >= 15 and all(s(x["name"]) == "fork_tree" for x in threads),
          f"/threads: {threads}")

    strings = f["strings"].asstr()[:]
    check(strings[0] == "", "strings[0] is not the empty string")
    total = 0
    for pid in (r["pid"] for r in rows):
        g = f["events"][str(pid)]
        n = g["ts_ns"].shape[0]
        total += n
        for name, dt in COLUMNS.items():
            d = g[name]
            check(d.dtype == np.dtype(dt), f"events/{pid}/{name}: dtype {d.dtype}, documented {dt}")
            check(d.compression == "gzip" and d.chunks is not None and d.maxshape == (None,),
                  f"events/{pid}/{name}: compression {d.compression}, chunks {d.chunks}, "
                  f"maxshape {d.maxshape}")
            check(d.shape == (n,), f"events/{pid}/{name}: {d.shape[0]} rows, ts_ns has {n}")
        check(g["args"].dtype == np.uint8 and g["args"].compression == "gzip", "args blob")
        ids = np.concatenate([g["name_id"][:], g["cat_id"][:]])
        check(int(ids.max()) < len(strings), f"events/{pid}: a string id beyond /strings")
        names = [strings[i] for i in g["name_id"][:]]
        check("forktrace_process" in names and "fork_tree" in names, f"events/{pid} names {names}")
        # The image slice as a region: the scope-profiler view.
        rg = g["regions"]["fork_tree"]
        st, en = rg["start_times"][:], rg["end_times"][:]
        check(rg.attrs["name"] == "fork_tree", "region name attribute")
        check(len(st) == len(en) == 1 and (en >= st).all(), f"regions of {pid}: {st} {en}")
        check(st.dtype == np.int64 and rg["start_times"].compression == "gzip", "region dtype")
    check(total == a["events"], f"events attribute {a['events']}, datasets hold {total}")
    check(total == len(ref.trace.events),
          f"{total} events in t.h5, {len(ref.trace.events)} in t.json of the same program")
    f.close()

    p = subprocess.run(["h5dump", "-H", path], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=30)
    check(p.returncode == 0 and b"processes" in p.stdout, f"h5dump -H failed: {p.stderr[-2000:]!r}")

    # Round trip: every event comes back, the tree too.
    rt = t.path("rt.json")
    p = subprocess.run([tool, "to-json", path, rt], stderr=subprocess.PIPE, timeout=30)
    check(p.returncode == 0, f"test_h5 to-json failed: {p.stderr.decode()[-2000:]}")
    back = ft.load_trace(rt)
    check(len(back.events) == total, f"round trip: {len(back.events)} events, t.h5 has {total}")
    check(tree_signature(json_rows(back)) == tree_signature(rows), "round trip changed the tree")
    check(back.meta["exit_status"] == meta["exit_status"] and back.meta["command"] == meta["command"],
          f"round trip metadata {back.meta}")


@test
def test_h5_unwritable(t):
    """An .h5 output that cannot be created fails like a JSON one would."""
    h5py_or_skip()
    res = t.forktrace(t.run_args([prog("fork_true")], out="/nonexistent-dir/t.h5"))
    check(res.rc != 0, f"forktrace succeeded writing into a missing directory\n  {res.describe()}")


@test
def test_h5_module_missing(t):
    """A forktrace whose HDF5 module (libforktrace-h5.so, loaded on demand)
    is missing refuses an .h5 output before the command starts, says why,
    and leaves nothing behind; JSON needs no module."""
    fbin = ft.forktrace_without("libforktrace-h5.so", os.path.join(t.dir, "bin-noh5"))
    cmd = ["sh", "-c", "touch ran"]
    r = subprocess.run([fbin, "run", "-o", "t.h5", "--"] + cmd,
                       cwd=t.dir, capture_output=True, text=True, timeout=60)
    check(r.returncode != 0, f"forktrace wrote .h5 without its HDF5 module: {r.stderr}")
    check("HDF5 support is missing" in r.stderr and "libforktrace-h5.so" in r.stderr,
          f"the error does not say the HDF5 module is missing: {r.stderr!r}")
    check(not os.path.exists(os.path.join(t.dir, "ran")), "the command ran anyway")
    left = [f for f in os.listdir(t.dir) if f.startswith("t.h5")]
    check(not left, f"left behind: {left}")
    r = subprocess.run([fbin, "run", "-q", "-o", "t.json", "--"] + cmd,
                       cwd=t.dir, capture_output=True, text=True, timeout=60)
    check(r.returncode == 0 and os.path.exists(os.path.join(t.dir, "t.json")),
          f"a JSON run without the HDF5 module failed: rc {r.returncode} {r.stderr!r}")
    check(os.path.exists(os.path.join(t.dir, "ran")), "the JSON run did not run the command")


if __name__ == "__main__":
    ft.main()
