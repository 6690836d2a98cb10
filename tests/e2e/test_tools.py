#!/usr/bin/python3
"""End-to-end tests: forktrace run on real tools (bash, make and gcc,
Python multiprocessing and subprocess, OpenMPI's mpirun)."""

import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ftcheck as ft  # noqa: E402
from ftcheck import Skip, check, prog, test  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


@test
def test_bash_pipeline(t):
    """Every stage of a pipeline is a child of bash, with its argv."""
    res = t.run_compare(["bash", "-c", "seq 1 1000 | grep 7 | sort -r | head -3"], expect_rc=0)
    want = sorted((str(i) for i in range(1, 1001) if "7" in str(i)), reverse=True)[:3]
    check(res.out == "".join(w + "\n" for w in want), f"pipeline output {res.stdout!r}")
    tr = res.trace
    root = tr.root()
    check(root.name == "bash", f"root: {root.describe()}")
    ft.assert_exit(root, code=0, trace=tr)
    stages = {"seq": ["seq", "1", "1000"], "grep": ["grep", "7"], "sort": ["sort", "-r"],
              "head": ["head", "-3"]}
    for name, argv in stages.items():
        p = tr.one(name=name)
        check(p.argv == argv, f"argv of {name}: {p.argv}")
        ft.assert_parent(p, root, tr)
        check(p.spawn == "fork", f"spawn of {p.describe()}")
        ft.assert_exit(p, code=0, trace=tr)
        ft.assert_instrumented(p, True, tr)
        ft.assert_flow(tr, root, p, "fork")
    ft.assert_count(tr.all(), 5, "processes (bash and 4 stages)", tr)


MAKEFILE = """\
OBJS = a.o b.o c.o main.o
app: $(OBJS)
\tcc -o app $(OBJS)
%.o: %.c
\tcc -c -o $@ $<
"""


def make_sources(d):
    for f in "abc":
        with open(os.path.join(d, f"{f}.c"), "w") as fh:
            fh.write(f"int f_{f}(void);\nint f_{f}(void) {{ return {ord(f)}; }}\n")
    with open(os.path.join(d, "main.c"), "w") as fh:
        fh.write("#include <stdio.h>\nint f_a(void), f_b(void), f_c(void);\n"
                 "int main(void) { printf(\"app %d\\n\", f_a() + f_b() + f_c()); return 0; }\n")
    with open(os.path.join(d, "Makefile"), "w") as fh:
        fh.write(MAKEFILE)


@test
def test_make_j4(t):
    """make -j4 compiling 4 files and linking: each cc under make, its cc1
    and as under it, collect2 and ld under the link, all exit 0."""
    res = t.run_compare(["make", "-j4"], setup=make_sources, sort_lines=True, expect_rc=0)
    app = subprocess.run([os.path.join(res.cwd, "app")], stdout=subprocess.PIPE)
    check(app.stdout == f"app {ord('a') + ord('b') + ord('c')}\n".encode(),
          f"the built app printed {app.stdout!r}")
    tr = res.trace
    root = tr.root()
    check(root.name == "make", f"root: {root.describe()}")
    ft.assert_exit(root, code=0, trace=tr)
    ccs = tr.find(name="cc")
    ft.assert_count(ccs, 5, "cc processes", tr)
    for f in ("a", "b", "c", "main"):
        cc = tr.one(name="cc", argv=["cc", "-c", "-o", f"{f}.o", f"{f}.c"])
        ft.assert_descendant(cc, root, tr)
        ft.assert_exit(cc, code=0, trace=tr)
        ft.assert_instrumented(cc, True, tr)
        cc1 = [k for k in tr.children(cc) if k.name == "cc1"]
        ft.assert_count(cc1, 1, f"cc1 children of the cc for {f}.c", tr)
        check(f"{f}.c" in cc1[0].argv, f"cc1 argv {cc1[0].argv}")
        ft.assert_exit(cc1[0], code=0, trace=tr)
        ft.assert_parent(cc1[0], cc, tr)
        as_ = [k for k in tr.children(cc) if k.name == "as"]
        ft.assert_count(as_, 1, f"as children of the cc for {f}.c", tr)
        check(f"{f}.o" in as_[0].argv, f"as argv {as_[0].argv}")
        ft.assert_exit(as_[0], code=0, trace=tr)
    link = tr.one(name="cc", argv=["cc", "-o", "app", "a.o", "b.o", "c.o", "main.o"])
    ft.assert_descendant(link, root, tr)
    ft.assert_exit(link, code=0, trace=tr)
    collect2 = [k for k in tr.children(link) if k.name == "collect2"]
    ft.assert_count(collect2, 1, "collect2 children of the link", tr)
    ft.assert_exit(collect2[0], code=0, trace=tr)
    ld = [p for p in tr.descendants(collect2[0]) if p.name == "ld"]
    ft.assert_count(ld, 1, "ld under collect2", tr)
    ft.assert_exit(ld[0], code=0, trace=tr)
    for p in tr.all():
        ft.assert_exit(p, code=0, trace=tr)


@test
def test_python_mp(t):
    """Debian's python3: a fork Pool of 3 workers, subprocess.run of echo
    with the inherited environment and with env={} (the agent must be
    re-injected: the second echo is instrumented)."""
    script = os.path.join(HERE, "mp_prog.py")
    res = t.run_compare([ft.PYTHON, script], expect_rc=0)
    check(res.stdout == f"squares {sum(i * i for i in range(30))}\nhi\nempty-env\n".encode(),
          f"stdout {res.stdout!r}")
    tr = res.trace
    root = tr.root()
    # Named after the script, the interpreter beside it; the forked
    # workers run the same script.
    check(root.name == "mp_prog.py" and root.interpreter == "python3",
          f"root: {root.describe()}")
    ft.assert_exit(root, code=0, trace=tr)
    workers = [k for k in tr.children(root) if k.name == "mp_prog.py"]
    ft.assert_count(workers, 3, "python3 children (Pool workers)", tr)
    for w in workers:
        check(w.spawn == "fork", f"spawn of worker {w.describe()}")
        ft.assert_exit(w, code=0, trace=tr)
        ft.assert_instrumented(w, True, tr)
    with open(os.path.join(res.cwd, "workers.txt")) as f:
        busy = {int(line) for line in f if line.strip()}
    check(busy <= {w.rec.get("pid") for w in workers},
          f"workers that did work {busy} are not the traced workers {workers}")
    for arg in ("hi", "empty-env"):
        e = tr.one(name="echo", argv=["/bin/echo", arg])
        ft.assert_parent(e, root, tr)
        check(e.spawn in ("fork", "vfork", "posix_spawn"), f"spawn of {e.describe()}")
        ft.assert_exit(e, code=0, trace=tr)
        last = e.image_slices[-1] if e.image_slices else {}
        check((last.get("args") or {}).get("instrumented") is True and last.get("name") == "echo",
              f"echo {arg} image not instrumented (env={{}} must not lose the agent): {last}")
    ft.assert_count(tr.all(), 6, "processes (python, 3 workers, 2 echo)", tr)


@test
def test_mpirun(t):
    hello = prog("mpi_hello")
    mpirun = os.environ.get("FT_MPIRUN")
    if not mpirun:
        raise Skip("FT_MPIRUN is not set")
    cmd = [mpirun, "-np", "4", "--oversubscribe"]
    if os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    cmd.append(hello)
    res = t.run_compare(cmd, sort_lines=True, expect_rc=0)
    lines = sorted(res.out.splitlines())
    check(lines == [f"mpi_hello rank {r} of 4" for r in range(4)], f"mpirun output {lines}")
    tr = res.trace
    root = tr.root()
    check(root.name in ("mpirun", "orterun", "mpiexec"), f"root: {root.describe()}")
    ft.assert_exit(root, code=0, trace=tr)
    ranks = tr.find(name="mpi_hello")
    ft.assert_count(ranks, 4, "mpi_hello processes", tr)
    for r in ranks:
        ft.assert_descendant(r, root, tr)
        ft.assert_exit(r, code=0, trace=tr)
        ft.assert_instrumented(r, True, tr)
        check(r.exe == hello or os.path.realpath(r.exe or "") == os.path.realpath(hello),
              f"exe of a rank: {r.exe!r}")
    # Each process has the rank the program was given (it wrote its pid
    # to mpi_hello.rank<N>), labelled with it, and its launcher.
    given = {}
    for n in range(4):
        with open(os.path.join(res.cwd, f"mpi_hello.rank{n}")) as f:
            given[int(f.read())] = n
    for r in ranks:
        check(r.rank == given.get(r.pid), f"rank of {r.describe()}: the program says "
              f"{given.get(r.pid)}")
        check(r.launcher == "Open MPI", f"launcher of {r.describe()}")
        labels = r.meta.get("process_labels", [{}])[0].get("labels", "")
        check(labels.startswith(f"rank {given.get(r.pid)}, "), f"labels of a rank: {labels!r}")


if __name__ == "__main__":
    ft.main()
