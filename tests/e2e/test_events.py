#!/usr/bin/python3
"""End-to-end tests of in-process events: the instrumentation API
(regions, instants, counters, thread names), -finstrument-functions with
names from the executable and its libraries, and the lossless guarantees
(SIGKILL, SIGSEGV, fork and exec while threads record, a flood of events).

The programs are tests/progs/ev_prog.c and ev_funcs.c; each records a
number of events the test knows, and the test counts them in the trace.
"""

import collections
import os
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ftcheck as ft  # noqa: E402
from ftcheck import check, fail, prog, test  # noqa: E402


def slices(p, cat, name=None, tid=None):
    return [e for e in p.events if e.get("ph") == "X" and e.get("cat") == cat
            and (name is None or e.get("name") == name)
            and (tid is None or e.get("tid") == tid)]


def by_thread(events):
    out = collections.defaultdict(list)
    for e in events:
        out[e.get("tid")].append(e)
    return out


def contains(outer, inner):
    """inner lies within outer (microsecond timestamps, 3 decimals)."""
    eps = 0.0015
    return (outer["ts"] - eps <= inner["ts"] and
            inner["ts"] + inner.get("dur", 0) <= outer["ts"] + outer.get("dur", 0) + eps)


@test
def ev_regions(ctx):
    """Nested regions, instants and counters on five threads, named."""
    threads, outer, inner = 4, 50, 3
    res = ctx.run_compare([prog("ev_prog"), "regions", str(threads), str(outer), str(inner)],
                          expect_rc=0)
    tr = res.trace
    p = tr.one(name="ev_prog")
    outers = by_thread(slices(p, "region", "outer"))
    inners = by_thread(slices(p, "region", "inner"))
    check(len(outers) == threads + 1,
          f"outer regions on {len(outers)} threads, expected {threads + 1}: {sorted(outers)}")
    for tid, os_ in outers.items():
        check(len(os_) == outer, f"thread {tid}: {len(os_)} outer regions, expected {outer}")
        ins = inners.get(tid, [])
        check(len(ins) == outer * inner,
              f"thread {tid}: {len(ins)} inner regions, expected {outer * inner}")
        check(all(not (o.get("args") or {}).get("unfinished") for o in os_ + ins),
              f"thread {tid}: a region is marked unfinished")
        # Every inner region lies inside one outer region of its thread.
        for i in ins:
            check(any(contains(o, i) for o in os_),
                  f"thread {tid}: inner region {i} is inside no outer region")
    ticks = by_thread([e for e in p.events if e.get("ph") == "i" and e.get("name") == "tick"])
    check(sorted(len(v) for v in ticks.values()) == [outer] * (threads + 1),
          f"instants per thread: {[len(v) for v in ticks.values()]}, expected {outer} each")
    counters = by_thread([e for e in p.events if e.get("ph") == "C" and e.get("name") == "progress"])
    for tid, cs in counters.items():
        vals = [c["args"]["value"] for c in sorted(cs, key=lambda c: c["ts"])]
        check(vals == [float(i) for i in range(outer)],
              f"thread {tid}: counter values {vals[:10]}..., expected 0..{outer - 1}")
    check(len(counters) == threads + 1, f"counters on {len(counters)} threads")
    names = p.thread_names()
    for i in range(threads):
        check(f"w{i}" in names, f"thread name w{i} missing: {names}")
    m = ft.SUMMARY_RE.match(res.summary_lines()[0].group(0))
    check(m.group(3) == "0", f"lost events reported: {m.group(0)}")


@test
def ev_functions(ctx):
    """-finstrument-functions: names from the executable (C, C++), a linked
    library and a dlopen'ed one, each called N times."""
    n = 200
    res = ctx.run_compare([prog("ev_funcs"), "calls", str(n)], expect_rc=0)
    p = res.trace.one(name="ev_funcs")
    count = collections.Counter(e["name"] for e in slices(p, "function"))
    for name in ("c_leaf", "lib_add", "plugin_mul", "evns::Widget::poke(int)", "cpp_poke"):
        check(count[name] == n, f"{name}: {count[name]} calls, expected {n}; seen {dict(count)}")
    check(count["main"] == 1, f"main: {count['main']} slices")
    unnamed = [k for k in count if k.startswith("0x") or "+0x" in k]
    check(not unnamed, f"functions without a name: {unnamed}")
    # A call lies inside the main slice.
    main = slices(p, "function", "main")[0]
    leaf = slices(p, "function", "c_leaf")[0]
    check(contains(main, leaf), f"c_leaf {leaf} is not inside main {main}")


@test
def ev_functions_no_module(ctx):
    """A forktrace whose symbol module (libforktrace-sym.so, loaded on the
    first lookup) is missing still writes every function slice, named by
    module and offset, says once why names are missing, and exits 0."""
    import subprocess
    fbin = ft.forktrace_without("libforktrace-sym.so", os.path.join(ctx.dir, "bin-nosym"))
    # The point of the module: forktrace itself does not load them.
    dyn = subprocess.run(["readelf", "-dW", ft.forktrace_bin()], capture_output=True,
                         text=True, timeout=30).stdout
    needed = [l for l in dyn.splitlines() if "(NEEDED)" in l]
    heavy = [l for l in needed if any(x in l for x in ("libdw", "libelf", "libstdc++", "hdf5"))]
    check(needed and not heavy, f"forktrace links what its modules are for: {heavy or dyn}")
    n = 20
    r = subprocess.run([fbin, "run", "-q", "-o", "t.json", "--",
                        prog("ev_funcs"), "calls", str(n)],
                       cwd=ctx.dir, capture_output=True, text=True, timeout=60)
    check(r.returncode == 0, f"forktrace failed without its symbol module: {r.stderr!r}")
    check(r.stderr.count("function names are missing") == 1 and
          "libforktrace-sym.so" in r.stderr,
          f"stderr does not say once that the symbol module is missing: {r.stderr!r}")
    p = ft.load_trace(os.path.join(ctx.dir, "t.json")).one(name="ev_funcs")
    names = [e["name"] for e in slices(p, "function")]
    named = [k for k in names if not (k.startswith("0x") or "+0x" in k)]
    check(len(names) >= 5 * n and not named,
          f"{len(names)} function slices, named without the module: {sorted(set(named))}")


@test
def ev_function_filters(ctx):
    """--no-functions drops function slices but keeps the process;
    --filter / --exclude keep what the regexes say."""
    cmd = [prog("ev_funcs"), "calls", "20"]
    res = ctx.run(cmd, opts=["--no-functions"], out="none.json", expect_rc=0)
    p = res.trace.one(name="ev_funcs")
    check(not slices(p, "function"), f"--no-functions kept {len(slices(p, 'function'))} slices")
    res = ctx.run(cmd, opts=["--filter", "^(c_leaf|lib_.*)$"], out="filter.json", expect_rc=0)
    names = {e["name"] for e in slices(res.trace.one(name="ev_funcs"), "function")}
    check(names == {"c_leaf", "lib_add"}, f"--filter kept {names}")
    res = ctx.run(cmd, opts=["--exclude", "poke|plugin"], out="exclude.json", expect_rc=0)
    names = {e["name"] for e in slices(res.trace.one(name="ev_funcs"), "function")}
    check("c_leaf" in names and "main" in names and not any(
        "poke" in x or "plugin" in x for x in names), f"--exclude kept {names}")


@test
def ev_recursion(ctx):
    """A call chain 10,000 deep: every level is a slice, nested."""
    depth = 10000
    res = ctx.run_compare([prog("ev_funcs"), "recurse", str(depth)], expect_rc=0)
    rs = slices(res.trace.one(name="ev_funcs"), "function", "recurse")
    check(len(rs) == depth, f"{len(rs)} recurse slices, expected {depth}")
    rs.sort(key=lambda e: (e["ts"], -e["dur"]))
    for a, b in zip(rs, rs[1:]):
        if not contains(a, b):
            fail(f"recurse slices do not nest: {a} then {b}")


def die_test(ctx, sig):
    n = 5000
    res = ctx.run([prog("ev_prog"), "die", str(n), str(sig)], expect_rc=128 + sig)
    p = res.trace.one(name="ev_prog")
    ft.assert_exit(p, signal=sig, trace=res.trace)
    got = slices(p, "region", "r")
    check(len(got) == n, f"{len(got)} of {n} regions recorded before {signal.Signals(sig).name} "
          f"are in the trace")
    check(res.out.strip() == f"recorded {n}", f"program output {res.out!r}")


@test
def ev_sigkill(ctx):
    """A process that SIGKILLs itself keeps every event it recorded: the
    collector salvages them from its shared buffers."""
    die_test(ctx, signal.SIGKILL)


@test
def ev_sigsegv(ctx):
    """A segmentation fault after N events: all N are in the trace and the
    exit status shows the signal."""
    die_test(ctx, signal.SIGSEGV)


@test
def ev_fork_exec_threads(ctx):
    """Threads record while the main thread forks and execs: the counts per
    thread, per child and per image are exact."""
    threads, n = 3, 20000
    res = ctx.run_compare([prog("ev_prog"), "forkexec", str(threads), str(n)], expect_rc=0)
    tr = res.trace
    root = tr.root()
    for i in range(threads):
        got = slices(root, "region", f"t{i}")
        check(len(got) == n, f"thread t{i}: {len(got)} regions, expected {n}")
    kids = tr.children(root)
    check(len(kids) == 1, f"children of the root: {kids}")
    got = slices(kids[0], "region", "child")
    check(len(got) == n, f"fork child: {len(got)} regions, expected {n}")
    # The exec'd image of the root recorded n "outer" regions.
    got = slices(root, "region", "outer")
    check(len(got) == n, f"exec'd image: {len(got)} regions, expected {n}")
    check(len(root.image_slices) == 2, f"root images: {root.image_slices}")


@test
def ev_flood(ctx):
    """Four threads record as fast as they can: every event arrives (the
    agent blocks rather than drop), and the summary says 0 lost."""
    threads, n = 4, 500000
    res = ctx.run([prog("ev_prog"), "flood", str(threads), str(n)], expect_rc=0, timeout=120)
    p = res.trace.one(name="ev_prog")
    per = collections.Counter(e["tid"] for e in p.events if e.get("ph") == "i" and
                              e.get("name") == "e")
    check(sorted(per.values()) == [n] * threads, f"instants per thread: {dict(per)}")
    m = res.summary_lines()[0]
    check(m.group(3) == "0", f"lost events: {m.group(0)}")


@test
def ev_clock(ctx):
    """Event times from different processes line up with CLOCK_MONOTONIC
    within a microsecond (the time stamp counter is calibrated)."""
    k = 20
    res = ctx.run([prog("ev_prog"), "clock", str(k)], expect_rc=0)
    printed = collections.defaultdict(dict)  # pid -> i -> (before, after)
    for line in res.out.split("\n"):
        if line.startswith("mark "):
            _, pid, i, before, after = line.split()
            printed[int(pid)][int(i)] = (int(before) / 1000.0, int(after) / 1000.0)
    check(len(printed) == k, f"{len(printed)} processes printed marks: {res.out!r}")
    worst = 0.0
    for p in res.trace.all():
        marks = sorted((e for e in p.events if e.get("ph") == "i" and e.get("name") == "mark"),
                       key=lambda e: e["ts"])
        if not marks:
            continue
        pid = p.rec.get("pid")
        check(len(marks) == 5 and len(printed.get(pid, {})) == 5,
              f"pid {pid}: {len(marks)} marks in the trace, {len(printed.get(pid, {}))} printed")
        # Each instant was recorded between two clock reads; the tightest
        # pair bounds it best (a read can be slowed by a page fault).
        i = min(range(5), key=lambda j: printed[pid][j][1] - printed[pid][j][0])
        before, after = printed[pid][i]
        ts = marks[i]["ts"]
        off = max(before - ts, ts - after, 0.0)
        worst = max(worst, off)
        check(off <= 1.0, f"pid {pid}: instant at {ts} us, recorded between clock reads "
              f"{before} and {after} us: {off:.3f} us outside")
    print(f"worst distance outside the clock reads {worst:.3f} us")


@test
def ev_exit_while_recording(ctx):
    """Threads still recording when the process calls exit(): what each had
    recorded by then (and more) is in the trace, salvaged from its buffer."""
    threads = 3
    res = ctx.run([prog("ev_prog"), "exitrun", str(threads)], expect_rc=0)
    done = [int(l.split()[3]) for l in res.out.split("\n") if l.startswith("thread ")]
    check(len(done) == threads and all(d > 0 for d in done), f"program said {res.out!r}")
    p = res.trace.one(name="ev_prog")
    per = collections.Counter(e["tid"] for e in slices(p, "region", "busy")
                              if not (e.get("args") or {}).get("unfinished"))
    got = sorted(per.values())
    check(len(got) == threads, f"regions on {len(got)} threads, expected {threads}: {dict(per)}")
    for want, have in zip(sorted(done), got):
        check(have >= want, f"a thread finished {want} regions before exit, the trace has "
              f"{have}: {dict(per)} vs {done}")


def frame(mtype, fields):
    """One wire frame (include/forktrace/wire.h) of msgpack map fields."""
    import msgpack
    import struct
    payload = msgpack.packb(fields, use_bin_type=True)
    return b"FT" + bytes([1, mtype]) + struct.pack("<I", len(payload)) + payload


@test
def ev_corrupt_records(ctx):
    """A chunk of records with a byte that does not parse: the records
    before it are kept, and combine says what is missing and exits 1."""
    import msgpack
    ts, tsc = 1_000_000_000, 5_000_000_000
    good = (msgpack.packb([0, tsc]) + msgpack.packb([3, 10, "kept"]) +
            msgpack.packb([4, 1000]))
    data = good + b"\xc1" + msgpack.packb([3, 10, "lost"])
    spill = ctx.path("t.ftspill")
    with open(spill, "wb") as f:
        f.write(frame(1, {1: ts, 2: 4242, 3: 4242, 4: 1, 11: 77, 7: ["prog"], 9: "/prog"}))
        f.write(frame(16, {1: ts + 5000, 2: 4242, 22: 0, 23: 0, 24: tsc + 10000, 25: data}))
        f.write(frame(10, {1: ts + 9000, 2: 4242, 14: 0}))
    res = ctx.forktrace(["combine", spill, "-o", "out.json"])
    check(res.rc == 1, f"combine exited {res.rc}, expected 1\n  {res.describe()}")
    check("does not parse" in res.err, f"no word of the bad record: {res.err!r}")
    tr = ft.load_trace(ctx.path("out.json"))
    names = [e["name"] for p in tr.all() for e in slices(p, "region")]
    check(names == ["kept"], f"regions {names}, expected just the one before the bad byte")


@test
def ev_collector_killed(ctx):
    """forktrace is SIGKILLed while the program runs: the program goes on
    unharmed, its agent writes spill files to OUTPUT.spill/, and
    `forktrace combine` on them gives every event it recorded."""
    n = 3000
    go, pidfile = ctx.path("go"), ctx.path("pid")
    started = ctx.start(ctx.run_args([prog("ev_prog"), "phases", str(n), go, pidfile]))
    # The pid file is written once the regions "before" are recorded.
    ft.wait_until(lambda: os.path.exists(pidfile) and open(pidfile).read().endswith("\n"),
                  "the program to record its first regions", started)
    os.kill(started[0].pid, signal.SIGKILL)
    started[0].wait()
    with open(pidfile) as f:
        pid = int(f.read())
    open(go, "w").close()

    def gone():
        try:
            os.kill(pid, 0)
            return False
        except ProcessLookupError:
            return True
    ft.wait_until(gone, "the program to finish after its collector was killed")
    spill = ctx.path("trace.json.spill")
    files = os.listdir(spill) if os.path.isdir(spill) else []
    # Beside the spill files: the run's table link and journal.
    check(any(f.endswith(".ftspill") for f in files) and
          all(f.endswith(".ftspill") or f in ("table", "table.journal") for f in files),
          f"spill files: {files}")
    res = ctx.forktrace(["combine", spill, "-o", "recovered.json"])
    check(res.rc == 0, f"combine of the spill files failed\n  {res.describe()}")
    tr = ft.load_trace(ctx.path("recovered.json"))
    p = tr.one(name="ev_prog")
    for name in ("before", "after"):
        got = slices(p, "region", name)
        check(len(got) == n, f"{len(got)} of {n} regions {name!r} recovered")
    ft.assert_exit(p, code=0, trace=tr)


if __name__ == "__main__":
    ft.main()
