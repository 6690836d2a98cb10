#!/usr/bin/python3
"""The HDF5 output (docs/HDF5_LAYOUT.md) of a real run, read with Debian's
h5py: `forktrace run -o t.h5 -- fork_tree` against `-o t.json` of an
identical run (same program names, tree, exit statuses, event count), the
documented dtypes, chunking and compression, strings that resolve, image
slices as regions/<name>/start_times and end_times, one rank<i> group per
process, h5dump -H, and the round trip .h5 -> events (reader_h5) -> JSON
keeping every event, with the critical path table and the name, rank
and resource use columns equal to the JSON's. Then scope-profiler's own reader (ProfilingH5Reader,
../shared/clients/scope_profiler) on a one-process run with regions and on
`mpirun -np 2` of a program whose ranks record different numbers of
regions, against the JSON of the same run (`forktrace combine t.h5`).
A function-heavy run read with h5py: its calls, its chunks and filters.

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


def scope_profiler_reader():
    """scope-profiler's ProfilingH5Reader, from ../shared beside the checkout."""
    here = os.path.dirname(os.path.abspath(__file__))
    path = os.path.join(here, "..", "..", "..", "shared", "clients", "scope_profiler")
    if not os.path.isdir(path):
        raise Skip(f"scope-profiler's reader is not at {path}")
    sys.path.insert(0, path)
    from scope_profiler.h5reader import ProfilingH5Reader
    return ProfilingH5Reader


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
    check(a["format"] == "forktrace-hdf5" and a["format_version"] == 3, f"format attrs {dict(a)}")
    m = f["metadata"]
    check(dict(m.attrs)["command"] == " ".join(ref.trace.meta["command"]),
          f"metadata attributes {dict(m.attrs)}")
    meta = ref.trace.meta
    for key in ("origin", "host", "exit_status", "processes", "lost_events"):
        check(a[key] == meta[key], f"root attribute {key}: {a[key]!r}, JSON says {meta[key]!r}")
    check([s(x) for x in a["command"]] == meta["command"], f"command {a['command']!r}")
    check(a["anchor_monotonic_ns"] > 0 and a["anchor_realtime_ns"] > 0, "anchor attributes")
    check(a["start_ns"] <= a["end_ns"], "start_ns > end_ns")

    # /processes: the same tree as the JSON trace of the same program.
    procs = m["processes"][:]
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

    threads = m["threads"][:]
    check(len(threads) >= 15 and all(s(x["name"]) == "fork_tree" for x in threads),
          f"/threads: {threads}")

    strings = m["strings"].asstr()[:]
    check(strings[0] == "", "strings[0] is not the empty string")
    total = 0
    for pid in (r["pid"] for r in rows):
        g = m["events"][str(pid)]
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
    # No ranks: rank<i> for the i-th process, its regions the process's.
    check(sorted(f) == sorted(["metadata"] + [f"rank{i}" for i in range(15)]), f"top: {list(f)}")
    for i, r in enumerate(procs):
        g = f[f"rank{i}"]
        check(list(g.attrs["pids"]) == [r["pid"]] and r["rank_group"] == i, f"rank{i} {r}")
        check(g["regions"] == m["events"][str(r["pid"])]["regions"], f"rank{i}/regions")
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
    with h5py.File(path, "r") as f:
        check_critical_path(f, back.doc)
        check_process_columns(f, back)
    check(tree_signature(json_rows(back)) == tree_signature(rows), "round trip changed the tree")
    check(back.meta["exit_status"] == meta["exit_status"] and back.meta["command"] == meta["command"],
          f"round trip metadata {back.meta}")


def check_critical_path(h5, doc):
    """metadata/critical_path of h5 holds the JSON's critical_path (doc: the
    JSON of the same trace), step for step."""
    want = doc["otherData"]["forktrace"].get("critical_path")
    check(want and want["steps"], f"no critical path in the JSON: {want}")
    t = h5["metadata"]["critical_path"]
    got = [{"pid": int(r["pid"]), "name": s(r["name"]), "start_ns": int(r["start_ns"]),
            "end_ns": int(r["end_ns"])} for r in t[:]]
    check(got == want["steps"], f"critical path:\n  h5   {got}\n  json {want['steps']}")
    check((t.attrs["start_ns"], t.attrs["end_ns"]) == (want["start_ns"], want["end_ns"]),
          f"critical path span {dict(t.attrs)}, JSON {want['start_ns']} {want['end_ns']}")


RUSAGE = ("user_ns", "sys_ns", "maxrss_kb", "minflt", "majflt", "nvcsw", "nivcsw", "inblock",
          "oublock")


def check_process_columns(h5, trace):
    """Each metadata/processes row's name, interpreter, launcher, ranks and
    resource use are its forktrace_process args in trace (the JSON of the
    same trace); the run measured the resource use of every process."""
    recs = {p.tpid: p.rec for p in trace.all()}
    for r in h5["metadata"]["processes"][:]:
        a = recs[int(r["pid"])]
        ru = a.get("rusage") or {}
        got = {"name": s(r["name"]), "interpreter": s(r["interpreter"]),
               "launcher": s(r["launcher"]), "rank": int(r["rank"]),
               "local_rank": int(r["local_rank"]), "rusage_source": s(r["rusage_source"]),
               **{k: int(r[k]) for k in RUSAGE}}
        want = {"name": a["name"], "interpreter": a.get("interpreter", ""),
                "launcher": a.get("launcher", ""), "rank": a.get("rank", -1),
                "local_rank": a.get("local_rank", -1), "rusage_source": ru.get("source", ""),
                **{k: ru.get(k, -1) for k in RUSAGE}}
        check(got == want, f"row of pid {int(r['pid'])}:\n  h5   {got}\n  json {want}")
        check(got["rusage_source"] in ("wait", "exit", "wait+descendants")
              and got["user_ns"] + got["sys_ns"] >= 0
              and got["maxrss_kb"] > 0, f"resource use of pid {int(r['pid'])}: {got}")


def reader_regions(reader):
    """{region name: {rank: (start ns list, end ns list)}} as scope-profiler reads them."""
    return {g.name: {rank: (r._start_times.tolist(), r._end_times.tolist())
                     for rank, r in g.regions.items()} for g in reader.get_regions()}


def json_regions(trace, pids):
    """The same from a JSON trace: X slices but function calls, per process in pids."""
    out = collections.defaultdict(lambda: ([], []))
    for e in trace.events:
        if e.get("ph") == "X" and e.get("pid") in pids and e.get("cat") != "function":
            ts = round(e["ts"] * 1000)
            out[e["name"]][0].append(ts)
            out[e["name"]][1].append(ts + round(e.get("dur", 0) * 1000))
    return out


def same_times(got, want, what):
    check(sorted(zip(*got)) == sorted(zip(*want)), f"{what}: {len(got[0])} calls in the "
          f".h5 {sorted(zip(*got))[:4]}..., {len(want[0])} in the JSON {sorted(zip(*want))[:4]}...")


@test
def test_h5_scope_profiler(t):
    """A one-process run with forktrace regions (ev_prog regions: 2 threads,
    5 "outer" regions each holding 3 "inner") opens in scope-profiler's
    reader as one rank whose regions and times are the JSON's."""
    h5py, np = h5py_or_skip()
    reader_cls = scope_profiler_reader()
    res = t.forktrace(t.run_args([prog("ev_prog"), "regions", "1", "5", "3"], out="t.h5"))
    check(res.rc == 0, f"forktrace run -o t.h5 failed\n  {res.describe()}")
    back = t.forktrace(["combine", t.path("t.h5"), "-o", t.path("t.json")])
    check(back.rc == 0, f"forktrace combine t.h5 failed\n  {back.describe()}")
    trace = ft.load_trace(t.path("t.json"))
    reader = reader_cls(t.path("t.h5"))
    check(reader.num_ranks == 1, f"num_ranks {reader.num_ranks}")
    got = reader_regions(reader)
    check(sorted(got) == ["ev_prog", "inner", "outer"], f"regions {sorted(got)}")
    check(len(got["outer"][0][0]) == 10 and len(got["inner"][0][0]) == 30,
          f"calls: outer {len(got['outer'][0][0])}, inner {len(got['inner'][0][0])}")
    want = json_regions(trace, {p.tpid for p in trace.all()})
    for name in got:
        same_times(got[name][0], want[name], f"region {name}")
    check(reader.metadata["format_version"] == 3 and reader.metadata["processes"] == 1,
          f"metadata {reader.metadata}")


@test
def test_h5_mpirun_ranks(t):
    """mpirun -np 2 of mpi_regions: rank r records r + 2 "step" regions. Two
    rank groups (mpirun, without a rank, in none), each rank's regions
    those of the process that printed that rank."""
    h5py, np = h5py_or_skip()
    reader_cls = scope_profiler_reader()
    mpirun = os.environ.get("FT_MPIRUN")
    if not mpirun or os.environ.get("FT_MPI_SKIP"):
        raise Skip(os.environ.get("FT_MPI_SKIP") or "FT_MPIRUN is not set")
    cmd = [mpirun, "-np", "2", "--oversubscribe"]
    if os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    cmd.append(prog("mpi_regions"))
    res = t.forktrace(t.run_args(cmd, out="t.h5"))
    check(res.rc == 0, f"forktrace run -o t.h5 failed\n  {res.describe()}")
    printed = {}
    for line in res.out.splitlines():
        w = line.split()
        if len(w) == 7 and w[0] == "mpi_regions":
            printed[int(w[2])] = int(w[6])
    check(sorted(printed) == [0, 1], f"mpirun output {res.out!r}")
    back = t.forktrace(["combine", t.path("t.h5"), "-o", t.path("t.json")])
    check(back.rc == 0, f"forktrace combine t.h5 failed\n  {back.describe()}")
    trace = ft.load_trace(t.path("t.json"))

    reader = reader_cls(t.path("t.h5"))
    check(reader.num_ranks == 2, f"num_ranks {reader.num_ranks}")
    got = reader_regions(reader)
    check({r: len(v[0]) for r, v in got["step"].items()} == {0: 2, 1: 3},
          f"step calls per rank {[(r, len(v[0])) for r, v in got['step'].items()]}")
    check(sorted(got["exchange"]) == [0, 1], f"exchange ranks {sorted(got['exchange'])}")
    with h5py.File(t.path("t.h5"), "r") as f:
        check(sorted(f) == ["metadata", "rank0", "rank1"], f"top level {sorted(f)}")
        rows = {int(r["pid"]): r for r in f["metadata"]["processes"][:]}
        for rank, host_pid in printed.items():
            pids = [int(p) for p in f[f"rank{rank}"].attrs["pids"]]
            check([int(rows[p]["host_pid"]) for p in pids] == [host_pid],
                  f"rank{rank} holds {pids}, the process that printed rank {rank} is {host_pid}")
            r = rows[pids[0]]
            check(int(r["rank"]) == rank and int(r["rank_group"]) == rank and
                  s(r["rank_var"]) == "OMPI_COMM_WORLD_RANK", f"row of rank {rank}: {r}")
            want = json_regions(trace, set(pids))
            for name in ("step", "exchange"):
                same_times(got[name][rank], want[name], f"rank {rank} region {name}")
        launchers = [r for r in rows.values() if int(r["rank"]) < 0]
        check(len(launchers) == 1 and int(launchers[0]["rank_group"]) == -1,
              f"processes without a rank: {launchers}")
        check_process_columns(f, trace)


@test
def test_h5_functions(t):
    """A function-heavy run (ev_funcs calls 30000: five functions called
    30000 times each, in main) read with stock h5py: exactly the calls it
    made, by name, each inside main, every event of an identical run's
    JSON; the busy process's columns in 16 Ki-row chunks through the
    standard shuffle and deflate filters only (no plugin). Combined again
    with FORKTRACE_THREADS=1 and with two threads, the same datasets."""
    h5py, np = h5py_or_skip()
    n = 30000
    cmd = [prog("ev_funcs"), "calls", str(n)]
    ref = t.run(cmd, out="t.json", expect_rc=0)
    res = t.forktrace(t.run_args(cmd, out="t.h5"))
    check(res.rc == 0, f"forktrace run -o t.h5 failed\n  {res.describe()}")
    with h5py.File(t.path("t.h5"), "r") as f:
        m = f["metadata"]
        strings = m["strings"].asstr()[:]
        rows = m["processes"][:]
        check(len(rows) == 1, f"{len(rows)} processes")
        g = m["events"][str(int(rows[0]["pid"]))]
        cols = {k: g[k][:] for k in ("ts_ns", "dur_ns", "name_id", "cat_id", "ph")}
        names = strings[cols["name_id"]]
        fn = (cols["ph"] == ord("X")) & (strings[cols["cat_id"]] == "function")
        count = collections.Counter(names[fn].tolist())
        for name in ("c_leaf", "lib_add", "plugin_mul", "evns::Widget::poke(int)", "cpp_poke"):
            check(count[name] == n, f"{name}: {count[name]} calls, expected {n}; {dict(count)}")
        check(count["main"] == 1, f"main: {count['main']} slices")
        want = collections.Counter(e["name"] for e in ref.trace.events
                                   if e.get("ph") == "X" and e.get("cat") == "function")
        check(count == want, f"calls by name: {dict(count)}, the JSON run: {dict(want)}")
        check(len(names) == len(ref.trace.events) > 5 * n,
              f"{len(names)} events in t.h5, {len(ref.trace.events)} in the JSON run")
        main = np.flatnonzero(fn & (names == "main"))[0]
        start, end = cols["ts_ns"][main], cols["ts_ns"][main] + cols["dur_ns"][main]
        calls = fn & (names != "main")
        check(((cols["ts_ns"][calls] >= start) &
               (cols["ts_ns"][calls] + cols["dur_ns"][calls] <= end)).all(),
              "a call outside main")
        for name in COLUMNS:
            ds = g[name]
            plist = ds.id.get_create_plist()
            filters = [plist.get_filter(i)[0] for i in range(plist.get_nfilters())]
            wide = ds.dtype.itemsize > 1
            want_f = ([h5py.h5z.FILTER_SHUFFLE] if wide else []) + [h5py.h5z.FILTER_DEFLATE]
            check(filters == want_f and ds.compression == "gzip" and ds.shuffle == wide,
                  f"{name}: filters {filters}")
            check(ds.chunks == (16384,), f"{name}: chunks {ds.chunks}")
        run_cols = {k: g[k][:] for k in COLUMNS}
    for threads in ("1", "2"):
        out = t.path(f"c{threads}.h5")
        env = dict(os.environ, FORKTRACE_THREADS=threads)
        r = t.forktrace(["combine", t.path("t.h5"), "-o", out], env=env)
        check(r.rc == 0, f"combine with {threads} threads failed\n  {r.describe()}")
        with h5py.File(out, "r") as f:
            g = f["metadata"]["events"][str(int(rows[0]["pid"]))]
            for k, v in run_cols.items():
                check(np.array_equal(g[k][:], v), f"{k} of the combine with {threads} threads")


@test
def test_h5_layout2(t):
    """A file of layout 2 (tests/h5/layout2.h5: `forktrace run -o layout2.h5
    -- /bin/sh -c /bin/true` by the writer before layout 3, tables at the
    root) still reads: `forktrace combine` gives its 17 events, sh and its
    child true, both exit 0."""
    fixture = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "h5", "layout2.h5")
    res = t.forktrace(["combine", fixture, "-o", t.path("t.json")])
    check(res.rc == 0, f"forktrace combine layout2.h5 failed\n  {res.describe()}")
    trace = ft.load_trace(t.path("t.json"))
    check(len(trace.events) == 17, f"{len(trace.events)} events, the file has 17")
    check(trace.meta["command"] == ["/bin/sh", "-c", "/bin/true"], f"command {trace.meta}")
    sh = trace.one(name="sh")
    true = trace.one(name="true")
    ft.assert_parent(true, sh, trace)
    ft.assert_exit(sh, code=0, trace=trace)
    ft.assert_exit(true, code=0, trace=trace)


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
