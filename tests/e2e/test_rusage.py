#!/usr/bin/python3
"""End-to-end tests of resource use per process (docs/INSIGHT.md, "Resource
use per process"; docs/TRACE_FORMAT.md, forktrace_process's "rusage").

tests/progs/burn touches a known amount of memory, spins until it has used
a known user CPU time and prints what getrusage(RUSAGE_SELF) said (user
ns, sys ns, peak KiB). The trace's figure for it must agree with both,
and say where it came from: the reaper's wait4 less what the process
reaped ("wait"), or the reaper's figure whole for a process that sent no
EXIT ("wait+descendants": killed, static).
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ftcheck as ft  # noqa: E402
from ftcheck import check, prog, test  # noqa: E402

RU_KEYS = ("source", "user_ns", "sys_ns", "maxrss_kb", "minflt", "majflt", "nvcsw", "nivcsw",
           "inblock", "oublock")


def rusage(p, tr, source):
    ru = p.rec.get("rusage")
    check(isinstance(ru, dict), f"no rusage in {p.describe()}\n{tr.dump()}")
    check(sorted(ru) == sorted(RU_KEYS), f"rusage keys {sorted(ru)} of {p.describe()}")
    check(ru["source"] == source,
          f"rusage source {ru['source']!r} of {p.describe()}, expected {source!r}: {ru}")
    for k in RU_KEYS[1:]:
        check(isinstance(ru[k], int) and ru[k] >= 0, f"rusage {k} = {ru[k]!r}: {ru}")
    return ru


def self_report(res):
    """What burn said it used: (user_ns, sys_ns, maxrss_kb)."""
    lines = [ln for ln in res.stdout.decode().splitlines() if ln.strip()]
    check(len(lines) == 1, f"burn printed {lines!r}")
    return tuple(int(x) for x in lines[0].split())


def within(got, want, frac, what, ru):
    check(abs(got - want) <= frac * want, f"{what}: trace says {got}, expected {want} "
          f"within {frac:.0%}: {ru}")


def check_burn(p, tr, res, source, user_ms, mib):
    """burn's figure: its user CPU and peak as it said them (within 10%),
    at least what it was told to burn and touch; its image's cpu_ns and
    its counters agree."""
    ru = rusage(p, tr, source)
    user, sys_, maxrss = self_report(res)
    check(user >= user_ms * 1_000_000, f"burn used {user} ns of user time, asked {user_ms} ms")
    within(ru["user_ns"], user, 0.10, "user_ns", ru)
    within(ru["user_ns"] + ru["sys_ns"], user + sys_, 0.10, "user_ns + sys_ns", ru)
    # The peak grows after burn's own reading (its exit: stdio, the
    # agent's EXIT): by pages, which are 10% of a small program's peak.
    check(maxrss <= ru["maxrss_kb"] <= max(1.1 * maxrss, maxrss + 2048),
          f"maxrss_kb: trace says {ru['maxrss_kb']}, burn said {maxrss}: {ru}")
    if mib:
        # The peak holds the touched memory, and not much more.
        within(ru["maxrss_kb"], mib * 1024, 0.10, f"maxrss_kb of {mib} MiB touched", ru)
        check(ru["minflt"] >= mib * 256 * 0.9, f"minflt below one per page touched: {ru}")
    last = p.image_slices[-1]
    cpu = (last.get("args") or {}).get("cpu_ns")
    check(isinstance(cpu, int), f"no cpu_ns on burn's last image: {last}")
    check(cpu <= ru["user_ns"] + ru["sys_ns"] and cpu >= 0.9 * user,
          f"cpu_ns {cpu} of burn's image, its rusage {ru}")
    counters = {e["name"]: e["args"] for e in p.events
                if e.get("ph") == "C" and e.get("cat") == "rusage"}
    check("cpu" in counters, f"no cpu counter in {p.describe()}")
    within(counters["cpu"]["user_ms"] * 1e6, ru["user_ns"], 0.01, "cpu counter user_ms", ru)
    if mib:
        within(counters["rss"]["peak_mib"] * 1024, ru["maxrss_kb"], 0.01, "rss peak_mib", ru)
    return ru


@test
def test_rusage_known(t):
    """A program that burns 300 ms of user time and touches 200 MiB, the
    command itself: the subreaper reaps it (wait4), its agent sent EXIT."""
    res = t.run([prog("burn"), "300", "200"], expect_rc=0)
    tr = res.trace
    check_burn(tr.root(), tr, res, "wait", 300, 200)


@test
def test_rusage_waitpid(t):
    """A child its traced parent reaps with waitpid: "wait", its own figure
    (the parent's is its own too: what it reaped is not in it)."""
    res = t.run([prog("burn"), "waitpid", "200", "0"], expect_rc=0)
    tr = res.trace
    parent = tr.root()
    kids = tr.children(parent)
    ft.assert_count(kids, 1, "children of burn waitpid", tr)
    check_burn(kids[0], tr, res, "wait", 200, 0)
    pru = rusage(parent, tr, "wait")
    check(pru["user_ns"] < 100_000_000,
          f"the parent's own figure holds its child's 200 ms: {pru}")


@test
def test_rusage_waitid(t):
    """A child its traced parent reaps with waitid: libc's waitid gives no
    rusage, the agent's reaps the child it found through wait4 ("wait"),
    within 10% as well."""
    res = t.run([prog("burn"), "waitid", "200", "50"], expect_rc=0)
    tr = res.trace
    kids = tr.children(tr.root())
    ft.assert_count(kids, 1, "children of burn waitid", tr)
    check_burn(kids[0], tr, res, "wait", 200, 50)


@test
def test_rusage_waitid_fork(t):
    """A fork child that never speaks (no exec: it sends no EXIT) reaped
    with waitid: the agent's waitid reaps it through wait4, so WAIT holds
    its figure ("wait+descendants"), within 10%."""
    res = t.run([prog("burn"), "waitid-fork", "200", "50"], expect_rc=0)
    tr = res.trace
    kids = tr.children(tr.root())
    ft.assert_count(kids, 1, "children of burn waitid-fork", tr)
    ft.assert_exit(kids[0], code=0, trace=tr)
    check_burn(kids[0], tr, res, "wait+descendants", 200, 50)


@test
def test_rusage_killed(t):
    """A child killed by SIGKILL sends no EXIT: its parent's wait4 figure,
    whole ("wait+descendants")."""
    res = t.run([prog("burn"), "waitpid", "200", "0", "kill"], expect_rc=0)
    tr = res.trace
    kid = tr.children(tr.root())[0]
    ft.assert_exit(kid, signal=9, trace=tr)
    check_burn(kid, tr, res, "wait+descendants", 200, 0)


@test
def test_rusage_orphan(t):
    """A child whose parent exits without waiting: the subreaper reaps it."""
    res = t.run([prog("burn"), "orphan", "200", "0"], expect_rc=0)
    tr = res.trace
    kids = tr.children(tr.root())
    ft.assert_count(kids, 1, "children of burn orphan", tr)
    check_burn(kids[0], tr, res, "wait", 200, 0)


@test
def test_rusage_static(t):
    """A static program (no agent, no EXIT): the subreaper's figure whole."""
    if os.environ.get("FT_STATIC_SKIP"):
        raise ft.Skip(os.environ["FT_STATIC_SKIP"])
    res = t.run([prog("static_child"), "5"], expect_rc=5)
    ru = rusage(res.trace.root(), res.trace, "wait+descendants")
    check(0 < ru["maxrss_kb"] < 64 * 1024, f"peak of a static program that exits: {ru}")
    check(ru["user_ns"] + ru["sys_ns"] < 500_000_000, f"CPU of a static program: {ru}")


def check_unwaited(t, mode):
    """A fork child that never execs, of a parent that has the kernel reap
    its children (mode "ignored": SIGCHLD SIG_IGN; "nocldwait":
    SA_NOCLDWAIT): nobody waits for it, so its agent sends EXIT at its
    end. The trace has its whole life, its exit code and its own figure
    ("exit") within 10%."""
    res = t.run([prog("burn"), mode, "200", "20"], expect_rc=0)
    tr = res.trace
    kids = tr.children(tr.root())
    ft.assert_count(kids, 1, f"children of burn {mode}", tr)
    kid = kids[0]
    ft.assert_exit(kid, code=3, trace=tr)
    life_ms = (kid.rec["end_ns"] - kid.rec["start_ns"]) / 1e6
    check(life_ms >= 200, f"burn {mode}'s child lived {life_ms:.1f} ms in the trace, "
          f"burned 200 ms of CPU: {kid.describe()}")
    check_burn(kid, tr, res, "exit", 200, 20)


@test
def test_rusage_sigchld_ignored(t):
    check_unwaited(t, "ignored")


@test
def test_rusage_nocldwait(t):
    check_unwaited(t, "nocldwait")


if __name__ == "__main__":
    ft.main()
