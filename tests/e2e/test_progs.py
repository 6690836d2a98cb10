#!/usr/bin/python3
"""End-to-end tests: forktrace run on the small programs of tests/progs.

Each test runs its program untraced and traced (run_compare: same exit
code, stdout and stderr), then checks the processes, parent edges, spawn
kinds and exit statuses in the trace. Processes are found by name and argv,
never by position in the file.
"""

import collections
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ftcheck as ft  # noqa: E402
from ftcheck import check, prog, test  # noqa: E402


def only_children(tr, parent, n):
    kids = tr.children(parent)
    ft.assert_count(kids, n, f"children of {parent.describe()}", tr)
    return kids


def assert_wait_mark(tr, parent, child):
    """The parent recorded reaping child, with the child's exit."""
    waits = [m for m in parent.marks(cat="wait", name="wait")
             if (m.get("args") or {}).get("child") == child.rec.get("pid")]
    check(waits, f"no wait mark for child {child.rec.get('pid')} in {parent.describe()}; "
          f"wait marks: {parent.marks(cat='wait')}")
    ex = (waits[-1].get("args") or {}).get("exit") or {}
    want = child.rec.get("exit") or {}
    check(all(ex.get(k) == want.get(k) for k in ("kind", "code", "signal")),
          f"wait mark of {child.describe()} says exit {ex}, the process says {want}")


# --------------------------------------------------------------------------

FORK_TREE_EDGES = {  # exit code of a node -> exit codes of its two children
    0: [20, 21], 20: [30, 31], 21: [32, 33],
    30: [10, 11], 31: [12, 13], 32: [14, 15], 33: [16, 17],
}


def check_fork_tree(tr):
    """15 processes in a binary tree three forks deep; every node's exit
    code names its place, so the parent edges are checked exactly."""
    root = tr.root()
    check(root.name == "fork_tree", f"root is {root.describe()}")
    ft.assert_count(tr.all(), 15, "processes", tr)
    by_code = {}
    for p in tr.all():
        ft.assert_exit(p, kind="code", trace=tr)
        check(p.name == "fork_tree", f"unexpected process {p.describe()}")
        if p.exit["code"] in by_code:
            ft.fail(f"two processes exited {p.exit['code']}\n{tr.dump()}")
        by_code[p.exit["code"]] = p
        ft.assert_instrumented(p, True, tr)
    check(set(by_code) == {0, 20, 21, 30, 31, 32, 33} | set(range(10, 18)),
          f"exit codes {sorted(by_code)} are not the tree's\n{tr.dump()}")
    check(by_code[0].tpid == root.tpid, f"the root did not exit 0: {root.describe()}")
    for code, kid_codes in FORK_TREE_EDGES.items():
        parent = by_code[code]
        kids = only_children(tr, parent, 2)
        check(sorted(k.exit["code"] for k in kids) == kid_codes,
              f"children of the node that exited {code} exited "
              f"{sorted(k.exit['code'] for k in kids)}, expected {kid_codes}\n{tr.dump()}")
        for k in kids:
            ft.assert_parent(k, parent, tr)
            check(k.spawn == "fork", f"spawn of {k.describe()} is not 'fork'")
            ft.assert_flow(tr, parent, k, "fork")
            assert_wait_mark(tr, parent, k)
    for code in range(10, 18):
        only_children(tr, by_code[code], 0)
    check(root.spawn is None, f"the root has a spawn kind: {root.describe()}")


@test
def test_fork_tree(t):
    res = t.run_compare([prog("fork_tree")], expect_rc=0)
    check_fork_tree(res.trace)


@test
def test_max_memory_spill(t):
    """The same tree with a tiny --max-memory: spilling to disk must not
    lose or change anything."""
    res = t.run_compare([prog("fork_tree")], opts=["--max-memory", "1024"], expect_rc=0)
    check_fork_tree(res.trace)
    spills = res.spill_lines()
    check(len(spills) == 1 and int(spills[0].group(1)) == 1024 and int(spills[0].group(2)) > 0,
          f"with --max-memory 1024 forktrace must say it spilled: {res.err!r}")
    # The default limit is far above what this tree needs: nothing spills.
    res = t.run([prog("fork_tree")], expect_rc=0)
    check(not res.spill_lines(), f"spilled under the default --max-memory: {res.err!r}")
    check_fork_tree(res.trace)


@test
def test_exec_chain(t):
    """chain_a execs chain_b execs chain_c: one process, three images, the
    argv of each image exactly as passed (a space, an empty string)."""
    path_a = prog("chain_a")
    res = t.run_compare([path_a, "start"], expect_rc=5)
    tr = res.trace
    ft.assert_count(tr.all(), 1, "processes (exec must not create processes)", tr)
    p = tr.root()
    check(p.name == "chain_c", f"name of the last image: {p.describe()}")
    check(p.argv == ["chain_c", "z", "", "end"], f"argv of the last image: {p.argv}")
    check(isinstance(p.exe, str) and p.exe.endswith("/chain_c"), f"exe: {p.exe!r}")
    check(p.images == 3, f"images: {p.images}, expected 3")
    ft.assert_exit(p, code=5, trace=tr)
    ft.assert_instrumented(p, True, tr)
    slices = p.image_slices
    ft.assert_count(slices, 3, "image slices", tr)
    want = [("chain_a", [path_a, "start"]),
            ("chain_b", ["chain_b", "x y", "--level=2"]),
            ("chain_c", ["chain_c", "z", "", "end"])]
    for i, (s, (name, argv)) in enumerate(zip(slices, want)):
        a = s.get("args") or {}
        check(a.get("image") == i, f"image slice {i} has image {a.get('image')}")
        check(s.get("name") == name, f"image {i} is named {s.get('name')!r}, expected {name!r}")
        check(a.get("argv") == argv, f"image {i} argv {a.get('argv')}, expected {argv}")
        check(isinstance(a.get("exe"), str) and a["exe"].endswith("/" + name),
              f"image {i} exe {a.get('exe')!r}")
        check(a.get("instrumented") is True, f"image {i} not instrumented: {s}")
    for a, b in zip(slices, slices[1:]):
        check(a["ts"] + a["dur"] <= b["ts"] + 0.001,
              f"image slices overlap: {a} and {b}")
    check((slices[-1].get("args") or {}).get("exit") == p.exit,
          f"last image slice exit {slices[-1].get('args')} differs from {p.exit}")


@test
def test_posix_spawn(t):
    res = t.run_compare([prog("spawn")], expect_rc=0)
    tr = res.trace
    root = tr.root()
    check(root.name == "spawn", f"root: {root.describe()}")
    ft.assert_exit(root, code=0, trace=tr)
    only_children(tr, root, 2)
    a = tr.one(name="exit_with", argv=["exit_with", "4"])
    b = tr.one(name="sh", argv=["sh", "-c", "exit 6"])
    for child, kind, code in ((a, "posix_spawn", 4), (b, "posix_spawnp", 6)):
        ft.assert_parent(child, root, tr)
        check(child.spawn == kind, f"spawn of {child.describe()} is not {kind!r}")
        ft.assert_exit(child, code=code, trace=tr)
        ft.assert_instrumented(child, True, tr)
        ft.assert_flow(tr, root, child, kind)
        assert_wait_mark(tr, root, child)
    check(a.exe.endswith("/exit_with"), f"exe of the posix_spawn child: {a.exe!r}")


def shell_marks(tr, p, kind):
    marks = p.marks(cat="shell", name=kind)
    for m in marks:
        check(m.get("ph") == "X" and isinstance(m.get("dur"), (int, float)),
              f"{kind} mark is not a complete slice: {m}")
    return {(m.get("args") or {}).get("cmd"): (m.get("args") or {}).get("status") for m in marks}


@test
def test_system(t):
    exit_with = prog("exit_with")
    res = t.run_compare([prog("use_system")], expect_rc=0)
    tr = res.trace
    root = tr.one(name="use_system")
    ft.assert_exit(root, code=0, trace=tr)
    kids = only_children(tr, root, 2)
    for k in kids:
        ft.assert_parent(k, root, tr)
    k3 = [k for k in kids if k.argv == ["sh", "-c", "exit 3"]]
    ft.assert_count(k3, 1, "system children running sh -c 'exit 3'", tr)
    ft.assert_exit(k3[0], code=3, trace=tr)
    # dash may exec the command in place of the shell or fork it: accept both.
    k9 = [k for k in kids if k is not k3[0]][0]
    ft.assert_exit(k9, code=9, trace=tr)
    ew = tr.one(name="exit_with")
    check(ew.argv == ["exit_with", "9"] or ew.argv == [exit_with, "9"],
          f"argv of exit_with: {ew.argv}")
    check(ew is k9 or k9 in tr.ancestors(ew), f"{ew.describe()} is not under {k9.describe()}")
    ft.assert_exit(ew, code=9, trace=tr)
    marks = shell_marks(tr, root, "system")
    want = {"exit 3": 3 << 8, f"{exit_with} 9": 9 << 8}
    check(marks == want, f"system marks {marks}, expected cmd -> status {want}")
    for k in kids:
        check(k.spawn == "system", f"spawn of {k.describe()} is not 'system'")
        ft.assert_flow(tr, root, k, "system")


@test
def test_popen(t):
    res = t.run_compare([prog("use_popen")], expect_rc=0)
    tr = res.trace
    check(res.stdout == b"popen read: hello-popen\n", f"stdout {res.stdout!r}")
    root = tr.one(name="use_popen")
    ft.assert_exit(root, code=0, trace=tr)
    kids = only_children(tr, root, 2)
    for k in kids:
        ft.assert_parent(k, root, tr)
    r = [k for k in kids if k.argv == ["sh", "-c", "echo hello-popen; exit 4"]]
    ft.assert_count(r, 1, "popen children running the 'r' command", tr)
    ft.assert_exit(r[0], code=4, trace=tr)
    w = [k for k in kids if k is not r[0]][0]
    check(w.name in ("sh", "cat"), f"the 'w' popen child is {w.describe()}")
    ft.assert_exit(w, code=0, trace=tr)
    marks = shell_marks(tr, root, "popen")
    want = {"echo hello-popen; exit 4": 4 << 8, "cat > popen_out.txt": 0}
    check(marks == want, f"popen marks {marks}, expected cmd -> status {want}")
    for k in kids:
        check(k.spawn == "popen", f"spawn of {k.describe()} is not 'popen'")
        ft.assert_flow(tr, root, k, "popen")


def check_env_child(tr, p, code):
    """p ended as env_child CODE started with an empty environment: the
    agent must have been re-injected (the image is instrumented and its
    thread name arrived) and must have passed itself on (/bin/true, exec'd
    with the environment env_child got, is instrumented too)."""
    check(p.name == "env_child", f"not env_child: {p.describe()}")
    ft.assert_exit(p, code=code, trace=tr)
    last = p.image_slices[-1] if p.image_slices else {}
    check((last.get("args") or {}).get("instrumented") is True and
          last.get("name") == "env_child",
          f"the env_child image was not instrumented: the agent was not re-injected into an "
          f"empty environment: {last}\n{tr.dump()}")
    check("envchild-thr" in p.thread_names(),
          f"thread 'envchild-thr' missing from {p.describe()} (threads {p.threads})")
    tru = tr.one(name="true")
    ft.assert_parent(tru, p, tr)
    check(tru.spawn == "fork", f"spawn of {tru.describe()}")
    ft.assert_exit(tru, code=0, trace=tr)
    ft.assert_instrumented(tru, True, tr)
    check((tru.image_slices[-1].get("args") or {}).get("instrumented") is True,
          f"/bin/true under an empty-env process is not instrumented: {tru.image_slices}")


@test
def test_exec_empty_envp(t):
    res = t.run_compare([prog("empty_env")], expect_rc=0)
    tr = res.trace
    root = tr.root()
    check(root.name == "empty_env", f"root: {root.describe()}")
    ft.assert_exit(root, code=0, trace=tr)
    child = only_children(tr, root, 1)[0]
    ft.assert_parent(child, root, tr)
    check(child.spawn == "fork", f"spawn of {child.describe()}")
    check(child.argv == ["env_child", "12"], f"argv {child.argv}")
    check_env_child(tr, child, 12)
    check(child.images == 2, f"images of {child.describe()}: expected 2 (fork copy, env_child)")


@test
def test_env_i(t):
    res = t.run_compare(["env", "-i", prog("env_child"), "13"], expect_rc=13)
    tr = res.trace
    root = tr.root()
    check(root.images == 2, f"images of {root.describe()}: expected 2 (env, env_child)")
    first = root.image_slices[0]
    check(first.get("name") == "env", f"first image is not env: {first}")
    check_env_child(tr, root, 13)
    ft.assert_count(tr.all(), 2, "processes", tr)


@test
def test_env_i_renamed_agent(t):
    """The agent finds its own path in LD_PRELOAD by its file name; a copy
    under another name is found through the loader (dladdr) instead. Either
    way an empty environment gets it back: a wrong path here would leave
    env_child and /bin/true uninstrumented."""
    agent = os.path.join(os.path.dirname(ft.forktrace_bin()), "libforktrace-agent.so")
    renamed = os.path.join(t.dir, "libft-renamed.so")
    shutil.copyfile(agent, renamed)
    env = dict(os.environ, FORKTRACE_AGENT=renamed)
    res = t.run(["env", "-i", prog("env_child"), "14"], env=env, expect_rc=14)
    tr = res.trace
    check_env_child(tr, tr.root(), 14)


@test
def test_vfork_exec(t):
    res = t.run_compare([prog("use_vfork")], expect_rc=0)
    tr = res.trace
    root = tr.one(name="use_vfork", pred=lambda p: p.rec.get("parent") == -1)
    ft.assert_exit(root, code=0, trace=tr)
    kids = only_children(tr, root, 2)
    for k in kids:
        check(k.spawn == "vfork", f"spawn of {k.describe()} is not 'vfork'")
        ft.assert_parent(k, root, tr)
        ft.assert_flow(tr, root, k, "vfork")
    ex = tr.one(name="exit_with")
    check(ex.argv == ["exit_with", "21"], f"argv {ex.argv}")
    ft.assert_exit(ex, code=21, trace=tr)
    check((ex.image_slices[-1].get("args") or {}).get("instrumented") is True,
          f"the exec'd image of the vfork child is not instrumented: {ex.image_slices}")
    other = [k for k in kids if k is not ex][0]
    ft.assert_exit(other, code=22, trace=tr)
    # It never exec'd: it runs use_vfork's image, so that is its name and argv.
    check(other.name == "use_vfork" and other.argv == root.argv,
          f"the vfork+_exit child runs use_vfork's image but is recorded as {other.describe()}")


@test
def test_mt_fork(t):
    """1000 forks from a process whose 4 other threads hammer hooked calls:
    no deadlock (the run finishes), every child with its own exit code."""
    res = t.run_compare([prog("mt_fork")], expect_rc=0, timeout=50)
    tr = res.trace
    root = tr.root()
    check(root.name == "mt_fork", f"root: {root.describe()}")
    ft.assert_exit(root, code=0, trace=tr)
    kids = tr.children(root)
    ft.assert_count(tr.all(), 1001, "processes", tr)
    check(len(kids) == 1000, f"{len(kids)} children of the root, expected 1000")
    codes = collections.Counter()
    for k in kids:
        check(k.spawn == "fork", f"spawn of {k.describe()}")
        ft.assert_exit(k, kind="code", trace=tr)
        codes[k.exit["code"]] += 1
    want = collections.Counter(i % 128 for i in range(1000))
    check(codes == want, f"exit codes of the children differ: missing {want - codes}, "
          f"extra {codes - want}")
    busy = {f"busy-{i}" for i in range(4)}
    check(busy <= root.thread_names(), f"thread names {root.thread_names()} lack {busy}")


def close_all(t, mode):
    res = t.run_compare([prog("close_all"), mode], expect_rc=0)
    tr = res.trace
    root = tr.root()
    check(root.name == "close_all", f"root: {root.describe()}")
    ft.assert_exit(root, code=0, trace=tr)
    tru = only_children(tr, root, 1)[0]
    check(tru.name == "true", f"child: {tru.describe()}")
    check(tru.spawn == "fork", f"spawn of {tru.describe()}")
    ft.assert_parent(tru, root, tr)
    ft.assert_exit(tru, code=0, trace=tr)
    ft.assert_instrumented(tru, True, tr)
    assert_wait_mark(tr, root, tru)
    check("after-close" in root.thread_names(),
          f"thread 'after-close' (named after closing every fd) missing: {root.threads}")


@test
def test_close_range(t):
    close_all(t, "range")


@test
def test_close_loop(t):
    close_all(t, "loop")


@test
def test_orphan(t):
    """B outlives its parent A and the root; forktrace (a subreaper) must
    wait for it and record exit 7 under A."""
    res = t.run_compare([prog("orphan")], expect_rc=0)
    tr = res.trace
    check(os.path.exists(os.path.join(res.cwd, "orphan.done")),
          "orphan.done missing when forktrace returned: it did not wait for the orphan")
    check(res.elapsed >= 0.3, f"forktrace returned after {res.elapsed:.2f} s < 0.3 s")
    root = tr.root()
    check(root.name == "orphan", f"root: {root.describe()}")
    ft.assert_exit(root, code=0, trace=tr)
    a = only_children(tr, root, 1)[0]
    ft.assert_parent(a, root, tr)
    ft.assert_exit(a, code=0, trace=tr)
    b = only_children(tr, a, 1)[0]
    ft.assert_parent(b, a, tr)
    check(b.spawn == "fork", f"spawn of {b.describe()}")
    ft.assert_exit(b, code=7, trace=tr)
    check(b.end_ns >= root.end_ns + 150_000_000,
          f"the orphan ended at {b.end_ns}, not 0.3 s after the root ({root.end_ns})")


@test
def test_killed_children(t):
    res = t.run_compare([prog("killed")], expect_rc=0)
    tr = res.trace
    check(res.stdout == b"killed ok: parent continues\n", f"stdout {res.stdout!r}")
    root = tr.root()
    ft.assert_exit(root, code=0, trace=tr)
    kids = only_children(tr, root, 2)
    killed = [k for k in kids if (k.exit or {}).get("signal") == 9]
    segv = [k for k in kids if (k.exit or {}).get("signal") == 11]
    check(len(killed) == 1 and len(segv) == 1,
          f"expected one child killed by SIGKILL and one by SIGSEGV\n{tr.dump()}")
    ft.assert_exit(killed[0], signal=9, trace=tr)
    ft.assert_exit(segv[0], signal=11, trace=tr)
    for k in kids:
        ft.assert_parent(k, root, tr)
        check(k.spawn == "fork", f"spawn of {k.describe()}")
        assert_wait_mark(tr, root, k)
    sig = segv[0].marks(cat="signal", name="SIGSEGV")
    check(sig and all((m.get("args") or {}).get("signal") == 11 for m in sig),
          f"no SIGSEGV signal mark in {segv[0].describe()}: {segv[0].marks()}")


@test
def test_sigkill_keeps_events(t):
    """What a process recorded before SIGKILL is kept: the killed child's
    thread name and the wait for its grandchild."""
    res = t.run_compare([prog("killed")], expect_rc=0)
    tr = res.trace
    root = tr.root()
    parents = [k for k in tr.children(root) if tr.children(k)]
    ft.assert_count(parents, 1, "children of the root with a child (the SIGKILL one)", tr)
    doomed = parents[0]
    ft.assert_exit(doomed, signal=9, trace=tr)
    check("doomed-thr" in doomed.thread_names(),
          f"thread 'doomed-thr' of the SIGKILLed process was lost: {doomed.threads}")
    g = only_children(tr, doomed, 1)[0]
    ft.assert_exit(g, code=0, trace=tr)
    assert_wait_mark(tr, doomed, g)


def check_static_image(p, tr):
    last = p.image_slices[-1] if p.image_slices else {}
    check(last.get("name") == "static_child (not instrumented)",
          f"static image slice named {last.get('name')!r}: {last}")
    check((last.get("args") or {}).get("instrumented") is False,
          f"static image slice not marked instrumented:false: {last}")
    check(p.name == "static_child", f"process_name of the static child: {p.describe()}")


@test
def test_static_children(t):
    prog("static_child")
    res = t.run_compare([prog("run_static")], expect_rc=0)
    tr = res.trace
    root = tr.root()
    ft.assert_exit(root, code=0, trace=tr)
    only_children(tr, root, 2)
    forked = tr.one(argv=["static_child", "8"])
    spawned = tr.one(argv=["static_child", "9"])
    for p, kind, code in ((forked, "fork", 8), (spawned, "posix_spawn", 9)):
        ft.assert_parent(p, root, tr)
        check(p.spawn == kind, f"spawn of {p.describe()} is not {kind!r}")
        ft.assert_exit(p, code=code, trace=tr)
        check_static_image(p, tr)
    check(forked.images == 2, f"images of the forked static child: {forked.describe()}")
    ft.assert_instrumented(spawned, False, tr)


@test
def test_static_root(t):
    path = prog("static_child")
    res = t.run_compare([path, "8"], expect_rc=8)
    tr = res.trace
    p = tr.root()
    ft.assert_count(tr.all(), 1, "processes", tr)
    ft.assert_exit(p, code=8, trace=tr)
    ft.assert_instrumented(p, False, tr)
    check(p.argv == [path, "8"], f"argv {p.argv}")
    check_static_image(p, tr)


@test
def test_exit_code(t):
    """Exit code 3 comes back from forktrace; without -o the trace goes to
    ./forktrace.json."""
    res = t.run([prog("exit_with"), "3"], out=None, expect_rc=3)
    check(res.out_path == os.path.join(t.dir, "forktrace.json"), res.out_path)
    tr = res.trace
    ft.assert_exit(tr.root(), code=3, trace=tr)
    # A dynamic program that exits at once: the agent's record of it must
    # still be there (it connected and said hello before exiting).
    ft.assert_instrumented(tr.root(), True, tr)


@test
def test_exit_signal(t):
    for sig in (15, 9):
        res = t.run([prog("killself"), str(sig)], cwd=t.subdir(f"sig{sig}"),
                    expect_rc=128 + sig)
        tr = res.trace
        p = tr.root()
        ft.assert_count(tr.all(), 1, "processes", tr)
        ft.assert_exit(p, signal=sig, trace=tr)
        ft.assert_instrumented(p, True, tr)


@test
def test_start_ticks(t):
    """A fork child that execs hands its start time (ticks after boot) to
    the new image, which then does not read /proc/self/stat: the value in
    the trace must still be what /proc says, for every child, or processes
    would not be told apart from a reused pid. Each child (forked by bash,
    which forks where dash would vfork, then exec'd) prints its pid and
    field 22 of its own stat."""
    n = 40
    script = ("i=0; while [ $i -lt %d ]; do i=$((i+1)); "
              "/bin/sh -c 'read -r l < /proc/$$/stat; set -- ${l##*) }; "
              "shift 19; echo $$ $1'; done" % n)
    res = t.run(["/bin/bash", "-c", script], expect_rc=0)
    tr = res.trace
    seen = 0
    for line in res.stdout.decode().split("\n"):
        if not line.strip():
            continue
        pid, ticks = (int(x) for x in line.split())
        procs = [p for p in tr.all() if p.rec.get("pid") == pid]
        check(len(procs) == 1, f"pid {pid}: {len(procs)} processes in the trace\n{tr.dump()}")
        p = procs[0]
        check(p.rec.get("start_ticks") == ticks,
              f"{p.describe()}: start_ticks {p.rec.get('start_ticks')}, /proc says {ticks}")
        check(p.name == "sh" and p.images == 2 and p.instrumented,
              f"{p.describe()}: expected the fork child and its exec'd sh, instrumented")
        seen += 1
    check(seen == n, f"{seen} children printed their start time, expected {n}")


def handover_setup(t):
    """A directory of ways to name an executable, for the hand-over of exe
    and start time to a new image (FORKTRACE_EXEC_TS): symbolic links
    absolute and relative, a directory link, "." and "..", a bare name
    found along a relative $PATH entry, and "#!" scripts. Returns
    (cwd, env, [(mode, path)], {path: expected exe})."""
    top = t.subdir("names")
    os.makedirs(os.path.join(top, "bin"), exist_ok=True)
    os.makedirs(os.path.join(top, "sub", "bin"), exist_ok=True)
    # A decoy: where "sub/../bin/mytrue" leads if ".." is mishandled.
    shutil.copy("/bin/true", os.path.join(top, "sub", "bin", "mytrue"))
    os.symlink("/bin/true", os.path.join(top, "bin", "mytrue"))
    os.symlink("../sub/../bin/mytrue", os.path.join(top, "bin", "hop"))
    os.symlink("bin", os.path.join(top, "dirlink"))
    script = os.path.join(top, "script.sh")
    with open(script, "w") as f:
        f.write("#!/bin/sh\nexit 0\n")
    os.chmod(script, 0o755)
    os.symlink("../script.sh", os.path.join(top, "bin", "viascript"))
    # A name longer than the agent hands over (AGENT_EXEC_TS_EXE): that
    # image reads /proc itself. Along $PATH the check gives up there: a
    # decoy in a later entry must not be taken for it.
    longdir = os.path.join(top, *(["d" * 200] * 6))
    os.makedirs(longdir)
    shutil.copy("/bin/true", os.path.join(longdir, "longtrue"))
    os.makedirs(os.path.join(top, "decoy"))
    shutil.copy("/bin/true", os.path.join(top, "decoy", "longtrue"))
    cwd = os.path.join(top, "sub")
    env = dict(os.environ)
    # A relative entry first: the bare names resolve from the cwd.
    env["PATH"] = "../bin:" + env.get("PATH", "/usr/bin:/bin") + ":" + longdir + ":" + \
        os.path.join(top, "decoy")
    elf = ["/bin/true", os.path.join(top, "bin", "mytrue"), "../dirlink/hop",
           "./../bin/./mytrue", "../dirlink/../sub/../bin/hop",
           os.path.join(longdir, "longtrue")]
    scripts = [script, "../bin/viascript"]
    runs = []
    for mode in ("fork", "spawn", "spawnfa"):
        runs += [(mode, x) for x in elf + scripts]
    for mode in ("forkp", "spawnp"):
        runs += [(mode, x) for x in ("mytrue", "hop", "viascript", "true", "longtrue")]
    shell = os.path.realpath("/bin/sh")
    want = {}
    for _, x in runs:
        full = x if "/" in x else \
            next(os.path.join(d, x) for d in env["PATH"].split(":")
                 if os.access(os.path.join(cwd, d, x), os.X_OK))
        full = os.path.realpath(os.path.join(cwd, full))
        with open(full, "rb") as f:
            is_script = f.read(2) == b"#!"
        want[x] = shell if is_script else full
    return cwd, env, runs, want


def handover_too_long(path):
    """Is path (as handover_setup runs it) one whose exe is not handed
    over, being longer than the agent's room for it?"""
    return os.path.basename(path) == "longtrue"


@test
def test_exe_handover(t):
    """Children started by fork+exec, posix_spawn and posix_spawnp are
    handed their exe and start time so that they need not read /proc: the
    trace must still name what /proc/<pid>/exe names (every symbolic link,
    "." and ".." resolved; a script's interpreter) and the start time
    /proc/<pid>/stat gives, whatever the path looked like."""
    cwd, env, runs, want = handover_setup(t)
    cmd = [prog("handover")] + [a for r in runs for a in r]
    res = t.run(cmd, cwd=cwd, env=env, expect_rc=0)
    tr = res.trace
    lines = [ln.split(" ", 3) for ln in res.stdout.decode().splitlines() if ln.strip()]
    check(len(lines) == len(runs), f"{len(lines)} children reported, expected {len(runs)}")
    for (pid, mode, ticks, path), run in zip(lines, runs):
        check((mode, path) == run, f"child line {mode} {path}, expected {run}")
        procs = [p for p in tr.all() if p.rec.get("pid") == int(pid)]
        check(len(procs) == 1, f"pid {pid}: {len(procs)} processes in the trace\n{tr.dump()}")
        p = procs[0]
        what = f"{mode} {path}: {p.describe()}"
        check(p.exe == want[path], f"{what}: exe {p.exe!r}, /proc would say {want[path]!r}")
        check(p.rec.get("start_ticks") == int(ticks),
              f"{what}: start_ticks {p.rec.get('start_ticks')}, /proc says {ticks}")
        forked = mode.startswith("fork")
        check(p.spawn == ("fork" if forked else
                          "posix_spawnp" if mode == "spawnp" else "posix_spawn"),
              f"{what}: spawn kind")
        check(p.images == (2 if forked else 1) and p.instrumented,
              f"{what}: expected {'the fork image and ' if forked else ''}the new image, "
              "instrumented")
        ft.assert_exit(p, code=0, trace=tr)
        # The first image starts with the process (a spawn child's with
        # the spawn call, which is also the exec time it was handed); a
        # fork child's exec'd image at its exec call, after the fork.
        imgs = [x.get("ts") for x in p.image_slices]
        check(len(imgs) == p.images and abs(imgs[0] * 1000 - p.start_ns) < 2 and
              (not forked or imgs[0] < imgs[1] <= p.end_ns / 1000),
              f"{what}: images start at {imgs} us, the process at {p.start_ns} ns")


@test
def test_target_cache(t):
    """Agents share what exec of an absolute path starts (the process
    table's exec-target cache): the second exec of an unchanged file finds
    it there (one stat, no open: checked under strace) and names the same
    exe, and a file rewritten in place, replaced, or reached through a link
    that now points to another file is taken for what it is now."""
    d = os.path.realpath(t.subdir("cache"))
    path, link = os.path.join(d, "prog"), os.path.join(d, "link")
    a, b = os.path.join(d, "a"), os.path.join(d, "b")
    dyn, static = prog("exit_with"), prog("static_child")
    shutil.copy(dyn, a)
    shutil.copy(dyn, b)
    shutil.copy(dyn, path)
    os.symlink(a, link)
    # A traced Python forks and execs each run by its absolute path, and
    # changes the files itself: another exec in between could take the
    # cache entry of the path. Each exit code names its run; runs 21, 23
    # and 24 repeat the run before them on the same, unchanged file.
    script = f"""
import os, shutil, sys, time
def run(path, code):
    pid = os.fork()
    if pid == 0:
        os.execv(path, [path, str(code)])
    if os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) != code:
        sys.exit(1)
    print(code, pid, flush=True)
def settle():
    time.sleep(0.15)  # only files last changed 100 ms ago are entered
settle()
run({path!r}, 11)
run({path!r}, 21)
with open({static!r}, "rb") as src, open({path!r}, "r+b") as dst:
    dst.truncate(0)
    dst.write(src.read())  # in place: the same inode
run({path!r}, 12)
shutil.copy({dyn!r}, {path!r} + ".new")
os.replace({path!r} + ".new", {path!r})
settle()
run({path!r}, 13)
run({path!r}, 23)
run({link!r}, 14)
run({link!r}, 24)
os.unlink({link!r})
os.symlink({b!r}, {link!r})
run({link!r}, 15)
"""
    # From a file: with the script in its argv, Python's HELLO would not
    # fit in its table slot, and a process on a connection maps no table.
    driver = os.path.join(d, "driver.py")
    with open(driver, "w") as f:
        f.write(script)
    log = t.path("strace.log")
    out = t.path("trace.json")
    _, p = ft.strace_forktrace_run(["/usr/bin/python3", driver], t.dir, log,
                                   "openat,newfstatat", out=out)
    tr = ft.load_trace(out)
    pids = dict(ln.split() for ln in p.stdout.decode().splitlines() if ln.strip())
    calls = collections.defaultdict(list)
    with open(log) as f:
        for ln in f:
            pid, _, call = ln.partition(" ")
            calls[pid].append(call.strip())

    def run(code):
        return tr.one(argv=[link if code % 10 >= 4 else path, str(code)])

    for code, exe in ((11, path), (21, path), (13, path), (23, path), (14, a), (24, a),
                      (15, b)):
        p = run(code)
        ft.assert_exit(p, code=code, trace=tr)
        last = p.image_slices[-1] if p.image_slices else {}
        check((last.get("args") or {}).get("instrumented") is not False and p.exe == exe,
              f"run {code}: exe {p.exe!r}, expected {exe!r} and instrumented: {p.describe()}")
    p = run(12)
    ft.assert_exit(p, code=12, trace=tr)
    last = p.image_slices[-1] if p.image_slices else {}
    check(p.images == 2 and (last.get("args") or {}).get("instrumented") is False,
          f"run 12 (the static file written over the dynamic one) is not its own image, "
          f"marked not instrumented: {p.describe()} {last}")
    for code in (21, 23, 24):
        target = link if code == 24 else path
        mine = calls[pids[str(code)]]
        opened = [c for c in mine if c.startswith("openat(") and f'"{target}"' in c]
        statted = [c for c in mine if c.startswith("newfstatat(") and f'"{target}"' in c]
        check(statted and not opened,
              f"run {code} (the same file again) did not find it in the cache: {mine}")
    for code in (11, 13, 14, 15):
        target = link if code >= 14 else path
        check(any(c.startswith("openat(") and f'"{target}"' in c
                  for c in calls[pids[str(code)]]),
              f"run {code} (a file the cache cannot know) did not open it")


@test
def test_handover_no_proc(t):
    """The point of the hand-over: under strace, no fork+exec'd or
    posix_spawn'd ELF child reads /proc/self/exe (the spawn with a file
    action and a relative path is the exception: the action may change
    directory, so that child reads it), and /proc/self/stat only where
    its start time could not be told (a clock tick passed meanwhile)."""
    cwd, env, runs, want = handover_setup(t)
    cmd = [prog("handover")] + [a for r in runs for a in r]
    log = t.path("strace.log")
    _, p = ft.strace_forktrace_run(cmd, cwd, log, "openat,open,readlink,readlinkat",
                                   out=t.path("trace.json"), env=env, timeout=50)
    lines = [ln.split(" ", 3) for ln in p.stdout.decode().splitlines() if ln.strip()]
    check(len(lines) == len(runs), f"{len(lines)} children reported, expected {len(runs)}")
    by_pid = collections.defaultdict(list)
    with open(log) as f:
        for ln in f:
            pid, _, call = ln.partition(" ")
            if "/proc/self/" in call:
                by_pid[int(pid)].append(call.strip())
    stat = collections.Counter()
    total = collections.Counter()
    for pid, mode, _, path in lines:
        calls = by_pid.get(int(pid), [])
        if mode == "spawnfa" and not path.startswith("/"):
            continue  # handed nothing: the file action might change directory
        elf = want[path] != os.path.realpath("/bin/sh")
        kind = "fork" if mode.startswith("fork") else "spawn"
        exe_read = any('"/proc/self/exe"' in c for c in calls)
        handed = elf and not handover_too_long(path)
        check(exe_read != handed, f"{mode} {path} (pid {pid}) read /proc/self/exe: {exe_read}, "
              "expected " + ("no (its exe is handed over)" if handed else
                             "yes (a script: its exe is the interpreter's)" if not elf else
                             "yes (its name is too long to hand over)") + f"\n{calls}")
        total[kind] += 1
        stat[kind] += any('"/proc/self/stat"' in c for c in calls)
    # strace slows every call, so a clock tick passes during some starts
    # (for a spawn child, from the call to its constructor: a third of them
    # here); that all of them missed the hand-over would be the agent's.
    for kind in ("fork", "spawn"):
        check(stat[kind] < total[kind],
              f"{stat[kind]} of {total[kind]} {kind} children read /proc/self/stat")


@test
def test_exec_failed(t):
    res = t.run_compare([prog("bad_exec")], expect_rc=0)
    tr = res.trace
    p = tr.root()
    ft.assert_count(tr.all(), 1, "processes", tr)
    check(p.name == "bad_exec" and p.images == 1, f"process: {p.describe()}")
    ft.assert_exit(p, code=0, trace=tr)
    marks = p.marks(cat="exec", name="exec failed")
    by_errno = collections.defaultdict(list)
    for m in marks:
        check(m.get("ph") == "i" and m.get("s") == "t", f"exec failed mark: {m}")
        by_errno[(m.get("args") or {}).get("errno")].append(m.get("args") or {})
    check(set(by_errno) == {2, 13}, f"exec failed marks {marks}, expected errno 2 and 13")
    for a in by_errno[2]:
        check(str(a.get("path")).endswith("forktrace-no-such-program-xyz") and
              a.get("error") == "No such file or directory", f"ENOENT mark args {a}")
    check(len(by_errno[13]) == 1, f"EACCES marks: {by_errno[13]}")
    a = by_errno[13][0]
    check(str(a.get("path")).endswith("not-executable.sh") and a.get("error") == "Permission denied",
          f"EACCES mark args {a}")


@test
def test_long_args(t):
    """A system() command and a failed exec's path long enough to fill the
    args of their marks (8 KiB): the trace stays valid JSON, the marks
    keep their status and errno, and only the long text is cut."""
    script = ("import os\n"
              "st = os.system('exit 200 #' + 'x' * 9000)\n"
              "try:\n"
              "    os.execv('/' + '\\x01' * 1400, ['x'])\n"
              "except OSError as e:\n"
              "    print(st, e.errno)\n")
    res = t.run_compare(["/usr/bin/python3", "-c", script], expect_rc=0)
    tr = res.trace
    root = tr.root()
    st, errno = (int(x) for x in res.stdout.split())
    check(st == 200 << 8, f"os.system returned {st}")
    marks = root.marks(cat="shell", name="system")
    ft.assert_count(marks, 1, "system marks", tr)
    a = marks[0].get("args") or {}
    check(a.get("status") == st, f"system mark status {a.get('status')}, expected {st}")
    cmd = a.get("cmd") or ""
    check(cmd.startswith("exit 200 #xxx") and 7000 < len(cmd) < 9010,
          f"system mark cmd of {len(cmd)} characters: {cmd[:40]!r}...")
    fails = root.marks(cat="exec", name="exec failed")
    ft.assert_count(fails, 1, "exec failed marks", tr)
    a = fails[0].get("args") or {}
    check(a.get("errno") == errno and a.get("error"),
          f"exec failed mark errno {a.get('errno')} error {a.get('error')!r}, expected {errno}")
    path = a.get("path") or ""
    check(path.startswith("/\x01\x01") and 1000 < len(path) <= 1401,
          f"exec failed path of {len(path)} characters: {path[:20]!r}")

@test
def test_thread_names(t):
    res = t.run_compare([prog("named_threads")], expect_rc=0)
    tr = res.trace
    p = tr.root()
    ft.assert_exit(p, code=0, trace=tr)
    host_pid = p.rec["pid"]
    check(p.threads.get(host_pid) == "named_threads",
          f"main thread (tid {host_pid}) name {p.threads.get(host_pid)!r}, threads {p.threads}")
    workers = {tid: n for tid, n in p.threads.items() if str(n).startswith("worker-")}
    check(sorted(workers.values()) == ["worker-0", "worker-1", "worker-2"],
          f"worker thread names: {p.threads}")
    check(host_pid not in workers, f"a worker has the main thread's tid: {p.threads}")
    sort = {}
    for e in p.events:
        if e.get("ph") == "M" and e.get("name") == "thread_sort_index":
            sort[e.get("tid")] = (e.get("args") or {}).get("sort_index")
    check(set(p.threads) <= set(sort), f"threads without thread_sort_index: {p.threads} {sort}")
    check(sort[host_pid] == min(sort.values()), f"the main thread does not sort first: {sort}")


if __name__ == "__main__":
    ft.main()
