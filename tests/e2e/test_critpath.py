#!/usr/bin/python3
"""End-to-end tests of the critical path (docs/TRACE_FORMAT.md "Critical
path") of real runs whose path is known: make -j2 with one chain of rules
longer than the other, a shell pipeline, an orphan that outlives its
parent; and `forktrace combine` of a trace, which must find the same
path."""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ftcheck as ft  # noqa: E402
from ftcheck import check, test  # noqa: E402

# all needs link; link needs slow and mid; mid needs quick. With two job
# slots, slow (1 s) and quick (0.2 s) start together, mid (0.2 s) after
# quick: slow then link (0.3 s) is the longest chain, by 0.6 s.
MAKEFILE = """\
all: link
link: slow mid
\tsleep 0.3
slow:
\tsleep 1.0
mid: quick
\tsleep 0.21
quick:
\tsleep 0.2
.PHONY: all link slow mid quick
"""


def path_of(tr):
    cp = tr.meta.get("critical_path")
    check(cp is not None, f"no critical_path in otherData.forktrace: {tr.meta}")
    return cp


def others(cp, root):
    """The steps not of the root, in time order."""
    return [s for s in cp["steps"] if s["pid"] != root.tpid]


def check_whole_life(step, p, what):
    """A process without children on the path is one step, its life."""
    check(step["start_ns"] == p.start_ns and step["end_ns"] == p.end_ns,
          f"{what}: step {step}, process {p.start_ns}-{p.end_ns}")


def run_make(t):
    def setup(d):
        with open(os.path.join(d, "Makefile"), "w") as f:
            f.write(MAKEFILE)
    return t.run_compare(["make", "-s", "-j2"], setup=setup, expect_rc=0)


@test
def test_critpath_make(t):
    """make -j2: the path is make's own time, sleep 1.0 (slow), make's
    time until it started link, sleep 0.3 (link), make's end; not the
    shorter chain quick, mid that ran beside slow."""
    res = run_make(t)
    tr = res.trace
    root = tr.root()
    cp = path_of(tr)
    slow = tr.one(argv=["sleep", "1.0"])
    link = tr.one(argv=["sleep", "0.3"])
    steps = others(cp, root)
    check([s["pid"] for s in steps] == [slow.tpid, link.tpid],
          f"steps besides make's: {steps}, expected slow {slow.tpid} then link "
          f"{link.tpid}\n{tr.dump()}")
    if len(steps) == 2:
        check_whole_life(steps[0], slow, "slow")
        check_whole_life(steps[1], link, "link")
    check(cp["start_ns"] == root.start_ns and cp["end_ns"] == root.end_ns,
          f"span {cp['start_ns']}-{cp['end_ns']}, make {root.start_ns}-{root.end_ns}")
    check(all(s["name"] == "make" for s in cp["steps"] if s["pid"] == root.tpid),
          f"make's steps are not named make: {cp['steps']}")


@test
def test_critpath_combine(t):
    """forktrace combine of the make trace computes the same path from the
    file (one input: pids and times as they were)."""
    res = run_make(t)
    out = t.path("combined.json")
    c = t.forktrace(["combine", "-o", out, res.trace.path])
    check(c.rc == 0, f"combine failed: {c.describe()}")
    with open(out) as f:
        combined = json.load(f)["otherData"]["forktrace"].get("critical_path")
    check(combined == path_of(res.trace),
          f"combine's path {combined}\nrun's {path_of(res.trace)}")


@test
def test_critpath_pipeline(t):
    """sh runs sleep 0.2 | sleep 0.6 and waits for both: the stage that
    ended last is on the path, between sh's own time."""
    res = t.run_compare(["sh", "-c", "sleep 0.2 | sleep 0.6; exit 0"], expect_rc=0)
    tr = res.trace
    root = tr.root()
    cp = path_of(tr)
    last = tr.one(argv=["sleep", "0.6"])
    steps = others(cp, root)
    check([s["pid"] for s in steps] == [last.tpid],
          f"steps besides sh's: {steps}, expected sleep 0.6 ({last.tpid})\n{tr.dump()}")
    if steps:
        check_whole_life(steps[0], last, "sleep 0.6")
    check(cp["end_ns"] == root.end_ns, f"path ends at {cp['end_ns']}, sh at {root.end_ns}")


@test
def test_critpath_orphan(t):
    """A subshell starts sleep 0.8 in the background and ends; sh ends
    after sleep 0.1: the orphan ended last, and the path is its ancestors'
    time up to the forks that made it, then its life."""
    res = t.run_compare(["sh", "-c", "(sleep 0.8 &); sleep 0.1; exit 0"], expect_rc=0)
    tr = res.trace
    root = tr.root()
    cp = path_of(tr)
    orphan = tr.one(argv=["sleep", "0.8"])
    check(orphan.end_ns > root.end_ns, f"the orphan ended before sh\n{tr.dump()}")
    chain = list(reversed(tr.ancestors(orphan))) + [orphan]
    check([s["pid"] for s in cp["steps"]] == [p.tpid for p in chain],
          f"steps {cp['steps']}, expected the orphan's line {[p.tpid for p in chain]}\n"
          f"{tr.dump()}")
    check_whole_life(cp["steps"][-1], orphan, "orphan")
    check(cp["start_ns"] == root.start_ns and cp["end_ns"] == orphan.end_ns,
          f"span {cp['start_ns']}-{cp['end_ns']}")


if __name__ == "__main__":
    ft.main()
