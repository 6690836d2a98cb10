#!/usr/bin/python3
"""End-to-end tests of the process tree under unusual orderings and
failures: orphans that the collector reaps before it has read their
parent's record of them, failed process creation, vfork children, lost
counts, thread names. Each compares the trace with ground truth the
program prints itself (its children's pids) or that the shell makes
certain (how many processes a command line starts).

tests/collector/test_proctree.c applies every order of the same facts to
the tree directly; these check the orders real programs produce.
"""

import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ftcheck as ft  # noqa: E402
from ftcheck import check, prog, test  # noqa: E402


def printed_children(res):
    pids = [int(m.group(1)) for m in re.finditer(rb"^child (\d+)$", res.stdout, re.M)]
    check(pids, f"the program printed no children\n  {res.describe()}")
    return pids


def check_burst(t, mode, n=3, rounds=3):
    """orphan_burst MODE n: the root and exactly its n children, each under
    the root with its own exit code, whatever order the collector learnt
    of them in. A few rounds: the order differs from run to run."""
    for r in range(rounds):
        res = t.run([prog("orphan_burst"), mode, str(n)], out=f"t{r}.json", expect_rc=0)
        tr = res.trace
        pids = printed_children(res)
        ft.assert_count(tr.all(), n + 1, f"processes ({mode}: the root and {n} children)", tr)
        root = tr.root()
        check(root.name == "orphan_burst", f"root: {root.describe()}")
        for i, pid in enumerate(pids):
            ps = tr.by_host_pid.get(pid, [])
            ft.assert_count(ps, 1, f"processes with the child's pid {pid}", tr)
            c = ps[0]
            ft.assert_parent(c, root, tr)
            ft.assert_exit(c, code=10 + i, trace=tr)
            want = {"fork": "fork", "exec": "fork", "vfork": "vfork", "spawn": "posix_spawn"}
            check(c.spawn == want[mode], f"spawn of {c.describe()}, expected {want[mode]}")
            check(c.tpid == pid, f"{c.describe()} got trace pid {c.tpid}, not its pid {pid}")
            # A fork child that exec'd ran its parent's image first; a
            # vfork child only borrows it until its exec: one image,
            # whichever of its HELLO and the FORK record came first.
            images = {"fork": 1, "exec": 2, "vfork": 1, "spawn": 1}[mode]
            check(c.images == images, f"{c.describe()}: expected {images} images\n{tr.dump()}")


@test
def test_orphans_fork(t):
    """Three fork children that exit while (or after) their parent
    returns: reaped by the collector, often before the parent's FORK
    records are read (7 processes before, three of them 'unknown')."""
    check_burst(t, "fork")


@test
def test_orphans_exec(t):
    """Orphans that exec an instrumented program: the new image's HELLO
    names the collector as its parent when it comes after the reparenting."""
    check_burst(t, "exec")


@test
def test_orphans_vfork(t):
    """vfork children that exec: each one image, the exec'd program's
    (it showed use_vfork's image before it as well when the parent's
    FORK record happened to be read before the child's HELLO)."""
    check_burst(t, "vfork", n=10)


@test
def test_orphans_spawn(t):
    check_burst(t, "spawn")


@test
def test_orphan_subshell(t):
    """bash's background subshell outlives bash: one subshell (exit 4),
    under bash, with its sleep under it; it was listed twice, once with
    parent -1 and name '?'."""
    res = t.run(["bash", "-c", "{ sleep 0.01; exit 4; } & exit 0"], expect_rc=0)
    tr = res.trace
    ft.assert_count(tr.all(), 3, "processes (bash, its subshell, sleep)", tr)
    root = tr.root()
    sub = tr.one(pred=lambda p: p is not root and p.name == "bash")
    ft.assert_parent(sub, root, tr)
    ft.assert_exit(sub, code=4, trace=tr)
    check(sub.spawn == "fork", f"spawn of {sub.describe()}")
    sl = tr.one(name="sleep")
    ft.assert_parent(sl, sub, tr)
    ft.assert_exit(sl, code=0, trace=tr)


@test
def test_orphan_loop(t):
    """100 times ( /bin/true & ): each subshell forks true and exits at
    once. 202 processes (bash, the $(seq) subshell, 100 subshells, 100
    trues); 290 before."""
    res = t.run(["bash", "-c", "for i in $(seq 100); do ( /bin/true & ) ; done"], expect_rc=0)
    tr = res.trace
    ft.assert_count(tr.all(), 202, "processes", tr)
    root = tr.root()
    trues = tr.find(name="true")
    ft.assert_count(trues, 100, "true processes", tr)
    for p in trues:
        parent = tr.parent_of(p)
        check(parent is not None and parent.name == "bash" and tr.parent_of(parent) is root,
              f"{p.describe()} is not under a subshell of the root\n{tr.dump()}")
        ft.assert_exit(p, code=0, trace=tr)
        check(p.images == 2, f"{p.describe()}: expected the subshell's image and true's")


def strace_process_count(t, cmd):
    """How many processes cmd creates, itself included, untraced by
    forktrace: strace -f's view of every pid that made a system call,
    less the threads (clone with CLONE_THREAD)."""
    strace = shutil.which("strace")
    if not strace:
        raise ft.Skip("strace is not installed")
    log = t.path("strace.log")
    p = subprocess.run([strace, "-f", "-qq", "-o", log, "-e", "trace=process"] + cmd,
                       cwd=t.subdir("strace"), stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=30)
    if p.returncode != 0 and b"Operation not permitted" in p.stderr:
        raise ft.Skip("strace cannot trace here")
    pids, threads, pending = set(), set(), {}
    with open(log) as f:
        for line in f:
            m = re.match(r"^(\d+) +(.*)$", line.rstrip("\n"))
            if not m:
                continue
            pid, rest = int(m.group(1)), m.group(2)
            pids.add(pid)
            if rest.startswith("clone") and rest.endswith("<unfinished ...>"):
                pending[pid] = "CLONE_THREAD" in rest
                continue
            r = re.search(r"= (\d+)$", rest)
            if rest.startswith("<... clone") and r and pending.pop(pid, False):
                threads.add(int(r.group(1)))
            elif rest.startswith("clone") and r and "CLONE_THREAD" in rest:
                threads.add(int(r.group(1)))
    return len(pids - threads)


def check_count_as_strace(t, cmd):
    want = strace_process_count(t, cmd)
    res = t.run(cmd, expect_rc=0)
    ft.assert_count(res.trace.all(), want, "processes (strace -f counts them)", res.trace)
    return res


@test
def test_process_substitution(t):
    """bash's >(...) runs a subshell that outlives the command writing
    into it."""
    check_count_as_strace(t, ["bash", "-c", "echo x > >(sleep 0.01; cat >/dev/null); exit 0"])


@test
def test_fork_failed(t):
    """fork and vfork failing with EAGAIN (RLIMIT_NPROC) leave a mark on
    the process that called them (the agent sent a record; the trace had
    nothing); so does a popen that fails (the agent sent nothing)."""
    res = t.run([prog("fork_fail")], expect_rc=0)
    tr = res.trace
    check(res.stdout.startswith(b"fork failed: 11\nvfork failed: 11\npopen failed: "),
          f"stdout {res.stdout!r}")
    popen_errno = int(res.stdout.split()[-1])
    ft.assert_count(tr.all(), 1, "processes", tr)
    marks = tr.root().marks(cat="fork", name="fork failed")
    got = sorted(((m.get("args") or {}).get("kind"), (m.get("args") or {}).get("errno"),
                  (m.get("args") or {}).get("error")) for m in marks)
    want = [("fork", 11, "Resource temporarily unavailable"),
            ("vfork", 11, "Resource temporarily unavailable")]
    check(got == want, f"fork failed marks {got}, expected {want}")
    # A popen that failed is a call that ended at once, with its errno.
    marks = tr.root().marks(cat="shell", name="popen")
    ft.assert_count(marks, 1, "popen marks", tr)
    a = marks[0].get("args") or {}
    check(a.get("cmd") == "true" and a.get("status") == -1 and a.get("errno") == popen_errno,
          f"popen mark {a}, expected status -1 and errno {popen_errno}")


@test
def test_main_thread_name(t):
    """ft_thread_name on the main thread names its track (it kept the
    program's name); a name given before an exec is the old image's."""
    res = t.run([prog("main_named")], expect_rc=0)
    p = res.trace.root()
    check(p.threads.get(p.pid) == "ft-main", f"main thread named {p.threads}")
    res = t.run([prog("main_named"), "exec"], out="exec.json", expect_rc=0)
    p = res.trace.root()
    check(p.name == "exit_with" and p.threads.get(p.pid) == "exit_with",
          f"after exec the main thread is named {p.threads}: {p.describe()}")


INT64_MAX = (1 << 63) - 1


@test
def test_main_thread_named_by_other(t):
    """A worker names the main thread: the name was counted as a lost
    event (the agent knew only the threads it saw start)."""
    res = t.run([prog("name_main")], expect_rc=0)
    p = res.trace.root()
    check(p.threads.get(p.pid) == "boss", f"main thread named {p.threads}")
    check("worker" in p.thread_names(), f"thread names {p.threads}")


@test
def test_fork_child_speaks_then_execs(t):
    """Fork children that record an instant (so they connect, moving from
    their table slot to a socket) and exec: the exec'd image's HELLO (in
    the table) is often read before the fork child's resumed HELLO on its
    socket. Each child: two images, the parent's then exit_with, the
    instant in its own process. A third image, 'not instrumented', was
    added, and the exec'd image's slot was closed under it."""
    for r in range(2):
        res = t.run([prog("speak_exec"), "20"], out=f"t{r}.json", expect_rc=0)
        tr = res.trace
        pids = printed_children(res)
        root = tr.root()
        for i, pid in enumerate(pids):
            ps = tr.by_host_pid.get(pid, [])
            ft.assert_count(ps, 1, f"processes with pid {pid}", tr)
            c = ps[0]
            ft.assert_parent(c, root, tr)
            ft.assert_exit(c, code=10 + i, trace=tr)
            sl = c.image_slices
            names = [s.get("name") for s in sl]
            check(names == ["speak_exec", "exit_with"],
                  f"{c.describe()}: images {names}, expected speak_exec, exit_with")
            inst = [e for e in c.events if e.get("cat") == "instant"]
            check(len(inst) == 1 and inst[0].get("name") == "before-exec",
                  f"{c.describe()}: instants {inst}")


@test
def test_subreaper_in_tree(t):
    """A subreaper of the tree reaps an orphan it did not create: one
    process B under its creator A, exit 7, and the wait mark in the
    subreaper (its WAIT made a second entry for B)."""
    res = t.run([prog("subreaper")], expect_rc=0)
    tr = res.trace
    b_pid = printed_children(res)[0]
    ft.assert_count(tr.all(), 3, "processes (subreaper, A, B)", tr)
    root = tr.root()
    bs = tr.by_host_pid.get(b_pid, [])
    ft.assert_count(bs, 1, f"processes with B's pid {b_pid}", tr)
    b = bs[0]
    a = tr.parent_of(b)
    check(a is not None and tr.parent_of(a) is root, f"B is not under A under the root\n{tr.dump()}")
    ft.assert_exit(b, code=7, trace=tr)
    waits = [m for m in root.marks(cat="wait") if (m.get("args") or {}).get("child") == b_pid]
    ft.assert_count(waits, 1, "wait marks for B in the subreaper", tr)


@test
def test_lost_saturates(t):
    """A peer reports losses of 2^63, 2^63 and 5 events: the total is
    the largest count a trace holds (it wrapped around to 5, which reads
    as the truth), with a warning; combine's sum over inputs likewise."""
    here = os.path.dirname(os.path.abspath(__file__))
    res = t.forktrace(t.run_args([ft.PYTHON, os.path.join(here, "lost_peer.py")]))
    check(res.rc == 0 and b"lost peer done" in res.stdout, f"{res.describe()}")
    check("implausible loss" in res.err, f"no warning about the implausible count: {res.err}")
    m = res.summary_lines()
    check(len(m) == 1 and int(m[0].group(3)) == INT64_MAX, f"summary: {res.err}")
    tr = ft.load_trace(t.path("trace.json"))
    check(tr.meta.get("lost_events") == INT64_MAX, f"lost_events {tr.meta.get('lost_events')}")
    p = tr.root()
    check(p.lost_events == INT64_MAX, f"{p.describe()} lost {p.lost_events}")
    res = t.forktrace(["combine", "trace.json", "trace.json", "trace.json", "-o", "c.json"])
    check(res.rc in (0, 1), f"{res.describe()}")
    c = ft.load_trace(t.path("c.json"))
    check(c.meta.get("lost_events") == INT64_MAX, f"combined lost_events {c.meta.get('lost_events')}")


SPAWN_FAILS = r"""
import os, sys
open("plain", "w").close()
for kind, path in (("spawn", "/nope"), ("spawn", "/nope"), ("spawn", "plain"),
                   ("spawnp", "no-such-command-anywhere")):
    f = os.posix_spawn if kind == "spawn" else os.posix_spawnp
    try:
        f(path, [path], {"PATH": "/usr/bin:/bin"})
        sys.exit(3)
    except OSError as e:
        print(kind, path, e.errno)
"""


@test
def test_spawn_failed_child(t):
    """A posix_spawn whose exec fails made a child that exited 127 (glibc
    reaps it inside posix_spawn, so its pid is unknown): one process per
    failed call, host pid -1, under the caller, with an 'exec failed'
    mark; the caller keeps its 'spawn failed' mark. strace -f counts the
    same processes; the trace had only the caller."""
    cmd = [ft.PYTHON, "-c", SPAWN_FAILS]
    res = check_count_as_strace(t, cmd)
    tr = res.trace
    check(res.stdout == b"spawn /nope 2\nspawn /nope 2\nspawn plain 13\n"
          b"spawnp no-such-command-anywhere 2\n", f"stdout {res.stdout!r}")
    root = tr.root()
    kids = tr.children(root)
    ft.assert_count(kids, 4, "children of the root", tr)
    want = sorted([("/nope", 2), ("/nope", 2), ("plain", 13), ("no-such-command-anywhere", 2)])
    got = []
    for k in kids:
        check(k.pid == -1 and k.tpid >= 1 << 22, f"{k.describe()}: expected host pid -1")
        ft.assert_exit(k, code=127, trace=tr)
        check(k.spawn in ("posix_spawn", "posix_spawnp"), f"spawn of {k.describe()}")
        ft.assert_flow(tr, root, k, k.spawn)
        marks = k.marks(cat="exec", name="exec failed")
        ft.assert_count(marks, 1, f"exec failed marks of {k.describe()}", tr)
        a = marks[0].get("args") or {}
        got.append((a.get("path"), a.get("errno")))
    check(sorted(got) == want, f"exec failed marks {sorted(got)}, expected {want}")
    fails = root.marks(cat="exec", name="spawn failed")
    ft.assert_count(fails, 4, "spawn failed marks on the caller", tr)


@test
def test_vfork_exec_told(t):
    """What a vfork child exec'd, or that its exec failed, comes from its
    parent's FORK record, the same every run: the failed one has an
    'exec failed' mark and its parent's image; the static one is named
    with the argv it was given (from /proc before, when the child was
    still alive to read: a race); the instrumented one is itself."""
    prog("static_child")  # skips when static binaries cannot be built
    for r in range(3):
        res = t.run_compare([prog("vfork_exec")], expect_rc=0) if r == 0 else \
            t.run([prog("vfork_exec")], out=f"t{r}.json", expect_rc=0)
        tr = res.trace
        root = tr.root()
        kids = tr.children(root)
        ft.assert_count(kids, 3, "vfork children", tr)
        by_code = {(k.exit or {}).get("code"): k for k in kids}
        check(sorted(by_code) == [5, 7, 127], f"exit codes {sorted(by_code)}\n{tr.dump()}")
        failed = by_code[127]
        marks = failed.marks(cat="exec", name="exec failed")
        ft.assert_count(marks, 1, f"exec failed marks of {failed.describe()}", tr)
        a = marks[0].get("args") or {}
        check(a.get("path") == "/nope" and a.get("errno") == 2, f"exec failed mark {a}")
        check(failed.name == "vfork_exec" and failed.images == 1,
              f"the child whose exec failed ran its parent's image: {failed.describe()}")
        st = by_code[7]
        check(st.name == "static_child" and st.argv == ["static_child", "7"] and
              st.images == 1, f"static child: {st.describe()}")
        ft.assert_instrumented(st, False, tr)
        ew = by_code[5]
        check(ew.name == "exit_with" and ew.images == 1, f"instrumented child: {ew.describe()}")
        ft.assert_instrumented(ew, True, tr)
        for k in kids:
            check(k.spawn == "vfork", f"spawn of {k.describe()}")


if __name__ == "__main__":
    ft.main()
