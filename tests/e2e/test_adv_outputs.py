#!/usr/bin/python3
"""forktrace's output files under adverse conditions: a full disk under
the --max-memory spill arena and under every output format, an output
directory that moves or turns read-only while the command runs, outputs
that are devices, FIFOs, stdout or symlinks, and outputs that are inputs
or each other.

The full-disk tests mount a small tmpfs (root only; skipped otherwise)
and unmount it at the end."""

import contextlib
import os
import signal
import stat
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ftcheck as ft  # noqa: E402
from ftcheck import Skip, check, prog, test  # noqa: E402

NOSPC = os.strerror(28)  # "No space left on device"


@contextlib.contextmanager
def small_tmpfs(d=None, size="1M"):
    """A tmpfs of size mounted at the new directory d, unmounted after.
    d None: a new directory in /tmp (a short path: forktrace takes a
    TMPDIR of at most 60 bytes, for the socket's name), removed after."""
    if os.geteuid() != 0:
        raise Skip("mounting a tmpfs needs root")
    made = d is None
    if made:
        d = tempfile.mkdtemp(prefix="ft-tmpfs-", dir="/tmp")
    else:
        os.makedirs(d)
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=1777", "tmpfs", d],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if p.returncode != 0:
        if made:
            os.rmdir(d)
        raise Skip(f"cannot mount a tmpfs: {p.stdout.decode(errors='replace').strip()}")
    try:
        yield d
    finally:
        subprocess.run(["umount", "-l", d])
        if made:
            os.rmdir(d)


def fill(d, leave=0):
    """Fills the file system of d up to its last `leave` bytes."""
    path = os.path.join(d, "fill")
    with open(path, "ab") as f:
        try:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
        except OSError:
            pass
    if leave:
        os.truncate(path, max(0, os.path.getsize(path) - leave))
    return path


def loop_cmd(n=50):
    return ["sh", "-c", f"for i in $(seq {n}); do /bin/true; done"]


def check_full_disk_error(res, path, what):
    check(res.rc == 1, f"{what}: exit {res.rc}, expected 1 (a clear error, not a signal)\n"
          f"  {res.describe()}")
    check(path in res.err and NOSPC in res.err,
          f"{what}: the message must name {path} and say {NOSPC!r}\n  {res.describe()}")


@test
def test_arena_full_tmpdir(t):
    """--max-memory spills process data to a file in TMPDIR. On a full
    TMPDIR a write to its mapping is SIGBUS, which would kill forktrace
    and lose the trace: so the space is reserved first, and what does not
    fit stays in memory, with a warning."""
    with small_tmpfs() as tmp:
        env = dict(os.environ, TMPDIR=tmp)
        # 100 processes with 1000 arguments of 30 bytes each (within
        # what the agent records of an argv): 3 MB of argv.
        cmd = ["sh", "-c", "set -- $(seq -f %030g 1 1000); "
               "for i in $(seq 100); do /bin/true \"$@\"; done"]
        res = t.run(cmd, opts=["--max-memory", "64K"], env=env, expect_rc=0)
        tr = res.trace
        trues = tr.find(name="true")
        ft.assert_count(trues, 100, "true processes", tr)
        want = ["/bin/true"] + [f"{i:030d}" for i in range(1, 1001)]
        for p in trues:
            check(p.argv == want, f"a true's argv is not whole: {len(p.argv or [])} args")
        # Whether some of it was spilled first depends on how much of the
        # tmpfs the process table took by then: only the warning is sure.
        check("cannot spill process data" in res.err and tmp in res.err and NOSPC in res.err,
              f"no warning that the spill file's disk is full\n  {res.describe()}")


@test
def test_full_disk_outputs(t):
    """Every output format on a full disk: exit 1, a message naming the
    file and ENOSPC, no temporary file left. HDF5 died of SIGSEGV (exit
    139) in libhdf5's atexit handler after its failed close. run, which
    still holds the trace, writes it to $TMPDIR and says where."""
    src = t.run(loop_cmd(), out="src.json", expect_rc=0).out_path
    for leave in (0, 4096, 65536):
        with small_tmpfs(t.path(f"full{leave}")) as d:
            filler = fill(d, leave)
            cases = [
                ("run -o .json", ["run", "-q", "-o", f"{d}/t.json", "--"] + loop_cmd(),
                 f"{d}/t.json"),
                ("run -o .json.gz", ["run", "-q", "-o", f"{d}/t.json.gz", "--"] + loop_cmd(),
                 f"{d}/t.json.gz"),
                ("run -o .h5", ["run", "-q", "-o", f"{d}/t.h5", "--"] + loop_cmd(),
                 f"{d}/t.h5"),
                ("run --report", ["run", "-q", "-o", t.path("ok.json"), "--report",
                                  f"{d}/r.html", "--"] + loop_cmd(), f"{d}/r.html"),
                ("combine -o .json", ["combine", "-q", src, "-o", f"{d}/c.json"],
                 f"{d}/c.json"),
                ("combine -o .h5", ["combine", "-q", src, "-o", f"{d}/c.h5"], f"{d}/c.h5"),
                ("report", ["report", "-q", src, "-o", f"{d}/r2.html"], f"{d}/r2.html"),
            ]
            keep = t.subdir(f"keep{leave}")
            env = dict(os.environ, TMPDIR=keep)
            for what, args, path in cases:
                # No room at all: every case. A page: the small outputs
                # (.gz, .html) and HDF5 fail mid-write. 64 KB: the large.
                if leave == 4096 and path.endswith(".json") or \
                        leave > 4096 and not path.endswith((".json", ".h5")):
                    continue
                res = t.forktrace(args, env=env)
                check_full_disk_error(res, path, f"{what} (free: {leave} bytes)")
                left = sorted(set(os.listdir(d)) - {os.path.basename(filler)})
                check(not left, f"{what}: files left on the full disk: {left}")
                # run still has the trace: it is written to $TMPDIR instead.
                kept = [f for f in os.listdir(keep) if f.endswith("-" + os.path.basename(path))]
                if args[0] != "run":
                    check(not kept, f"{what}: files in $TMPDIR: {kept}")
                    continue
                check(len(kept) == 1 and os.path.join(keep, kept[0]) in res.err,
                      f"{what}: the trace is not kept in $TMPDIR, or not named: {kept}\n"
                      f"  {res.describe()}")
                kept = os.path.join(keep, kept.pop())
                if path.endswith(".h5"):
                    with open(kept, "rb") as f:
                        check(f.read(8) == b"\x89HDF\r\n\x1a\n", f"{kept} is no HDF5 file")
                elif path.endswith(".html"):
                    with open(kept, "rb") as f:
                        check(f.read().rstrip().endswith(b"</html>"), f"{kept} is cut short")
                else:
                    check_trace_file(kept, what)
                os.unlink(kept)


def check_trace_file(path, what):
    """path holds a whole, valid trace."""
    try:
        ft.load_trace(path)
    except (AssertionError, OSError) as e:
        ft.fail(f"{what}: {path} is not a whole trace: {e}")


def no_temporaries(d, what):
    left = [f for f in os.listdir(d) if ".tmp-" in f]
    check(not left, f"{what}: temporary files left in {d}: {left}")


@test
def test_output_devices(t):
    """-o naming a character device, a symlink to one, a FIFO, or stdout
    ("-", a link to /proc/self/fd/1) is written in place; the node stays
    what it was. The atomic replace swapped it for a regular file."""
    if os.geteuid() != 0:
        raise Skip("mknod needs root")
    null = t.path("null")
    os.mknod(null, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    os.symlink("null", t.path("null-link"))
    for out in ("null", "null-link"):
        res = t.forktrace(t.run_args(loop_cmd(3), out=out))
        check(res.rc == 0, f"-o {out}: exit {res.rc}\n  {res.describe()}")
        st = os.stat(null)
        check(stat.S_ISCHR(st.st_mode) and st.st_rdev == os.makedev(1, 3),
              f"-o {out} replaced the device node {null} by a regular file")
        check(os.path.islink(t.path("null-link")), f"-o {out} replaced the symlink")
    no_temporaries(t.dir, "-o device")

    # A FIFO: a reader gets the whole trace; the FIFO stays a FIFO.
    fifo = t.path("fifo")
    os.mkfifo(fifo)
    reader = subprocess.Popen(["cat", fifo], stdout=subprocess.PIPE)
    res = t.forktrace(t.run_args(loop_cmd(3), out="fifo"))
    data = reader.communicate(timeout=20)[0]
    check(res.rc == 0, f"-o FIFO: exit {res.rc}\n  {res.describe()}")
    check(stat.S_ISFIFO(os.lstat(fifo).st_mode), "-o FIFO replaced the FIFO by a file")
    with open(t.path("from-fifo.json"), "wb") as f:
        f.write(data)
    check_trace_file(t.path("from-fifo.json"), "-o FIFO")

    # stdout, as "-" and through a symlink to /proc/self/fd/1: the trace
    # alone on stdout, the summary on stderr.
    os.symlink("/proc/self/fd/1", t.path("stdout-link"))
    src = t.path("src.json")
    for args in (t.run_args(loop_cmd(3), out="-"),
                 t.run_args(loop_cmd(3), out="stdout-link"),
                 ["combine", t.path("from-fifo.json"), "-o", "-"],
                 ["combine", t.path("from-fifo.json"), "-o", "stdout-link"]):
        res = t.forktrace(args)
        check(res.rc == 0, f"{args}: exit {res.rc}\n  {res.describe()}")
        with open(src, "wb") as f:
            f.write(res.stdout)
        check_trace_file(src, f"{' '.join(args)}: stdout")
        check(os.path.islink(t.path("stdout-link")), f"{args} replaced the symlink")
        check("written to" in res.err or "combined" in res.err,
              f"{args}: no summary on stderr\n  {res.describe()}")
    res = t.forktrace(["report", src, "-o", "-"])
    page = res.stdout.lower()
    check(res.rc == 0 and page.startswith(b"<!doctype html>") and
          page.rstrip().endswith(b"</html>"), f"report -o -: no page on stdout\n  {res.describe()}")
    no_temporaries(t.dir, "-o stdout")

    # HDF5 seeks: a pipe or device is refused, clearly, before the command.
    marker = t.path("ran")
    os.symlink("/proc/self/fd/1", t.path("pipe.h5"))
    res = t.forktrace(["run", "-o", "pipe.h5", "--", "touch", marker])
    check(res.rc == 1 and "regular file" in res.err and not os.path.exists(marker),
          f"-o a pipe as .h5 must be refused before the command\n  {res.describe()}")


@test
def test_symlink_output(t):
    """A symlink named by -o: its target gets the trace, the link stays.
    A link that another user planted in a sticky world-writable directory
    is refused, as the kernel's protected_symlinks refuses it to open()."""
    sub = t.subdir("sub")
    os.symlink("sub/real.json", t.path("link.json"))
    with open(t.path("sub", "real.json"), "w") as f:
        f.write("old")
    os.chmod(t.path("sub", "real.json"), 0o600)
    t.run(loop_cmd(3), out="link.json", expect_rc=0)
    check(os.path.islink(t.path("link.json")), "-o link.json replaced the symlink by a file")
    check_trace_file(t.path("sub", "real.json"), "-o link.json")
    check(stat.S_IMODE(os.stat(t.path("sub", "real.json")).st_mode) == 0o600,
          "the replaced file did not keep its permissions")
    # Root replacing another user's file gives it back to that user.
    if os.geteuid() == 0:
        os.chown(t.path("sub", "real.json"), 65534, 65534)
        t.run(loop_cmd(3), out="link.json", expect_rc=0)
        st = os.stat(t.path("sub", "real.json"))
        check((st.st_uid, st.st_gid) == (65534, 65534) and stat.S_IMODE(st.st_mode) == 0o600,
              f"the replaced file is now {st.st_uid}:{st.st_gid} "
              f"{oct(stat.S_IMODE(st.st_mode))}, was 65534:65534 0o600")
    # A link to a file not there yet: the file is made.
    os.symlink("sub/new.json", t.path("new-link.json"))
    res = t.forktrace(["combine", t.path("sub", "real.json"), "-o", "new-link.json"])
    check(res.rc == 0 and os.path.islink(t.path("new-link.json")),
          f"combine -o new-link.json\n  {res.describe()}")
    check_trace_file(t.path("sub", "new.json"), "combine -o new-link.json")
    no_temporaries(t.dir, "symlinks")
    no_temporaries(sub, "symlinks")
    # An empty name is no file: refused before the command runs (it ran,
    # and the trace was then lost at the rename).
    marker = t.path("ran")
    res = t.forktrace(["run", "-o", "", "--", "touch", marker])
    check(res.rc == 1 and not os.path.exists(marker), f"-o '': {res.describe()}")
    no_temporaries(t.dir, "-o ''")

    if os.geteuid() != 0:
        return
    sticky = t.subdir("sticky")
    os.chmod(sticky, 0o1777)
    victim = t.path("victim.json")
    with open(victim, "w") as f:
        f.write("precious")
    planted = os.path.join(sticky, "t.json")
    os.symlink(victim, planted)
    os.lchown(planted, 65534, 65534)
    res = t.forktrace(["run", "-o", planted, "--", "true"])
    check(res.rc == 1 and planted in res.err, f"a planted symlink was followed\n  {res.describe()}")
    with open(victim) as f:
        check(f.read() == "precious", "the planted symlink's target was overwritten")


@test
def test_output_is_input(t):
    """An output that is an input, or the same file as the other output
    (by name, through a symlink, a hard link, "-" and /dev/stdout), is
    refused with exit 2 before any work; `report t.json -o t.json`
    replaced the trace by its report."""
    t.run(loop_cmd(3), out="t.json", expect_rc=0)
    with open(t.path("t.json"), "rb") as f:
        orig = f.read()
    os.symlink("t.json", t.path("sym.json"))
    os.link(t.path("t.json"), t.path("hard.json"))
    d = t.subdir("dir")
    with open(os.path.join(d, "a.json"), "wb") as f:
        f.write(orig)
    marker = t.path("ran")
    cases = [
        ["report", "t.json", "-o", "t.json"],
        ["report", "t.json", "-o", "sym.json"],
        ["report", "sym.json", "-o", "hard.json"],
        ["combine", "t.json", "-o", "t.json"],
        ["combine", "dir/a.json", "t.json", "-o", "./hard.json"],
        ["combine", "dir", "-o", "dir/a.json"],
        ["run", "-o", "x.json", "--report", "x.json", "--", "touch", marker],
        ["run", "-o", "x.json", "--report", "dir/../x.json", "--", "touch", marker],
        ["run", "-o", "sym.json", "--report", "hard.json", "--", "touch", marker],
        ["run", "-o", "-", "--report", "/dev/stdout", "--", "touch", marker],
    ]
    for args in cases:
        res = t.forktrace(args)
        check(res.rc == 2, f"{' '.join(args)}: exit {res.rc}, expected 2\n  {res.describe()}")
        check("same file" in res.err or "is the input" in res.err or "input directory" in res.err,
              f"{' '.join(args)}: no clear message\n  {res.describe()}")
        check(not os.path.exists(marker), f"{' '.join(args)}: the command ran")
        with open(t.path("t.json"), "rb") as f:
            check(f.read() == orig, f"{' '.join(args)}: t.json was changed")
        check(not os.path.exists(t.path("x.json")), f"{' '.join(args)}: x.json was written")
    # A combined trace in the input directory would be read again by the
    # next combine of it.
    res = t.forktrace(["combine", "dir", "-o", "dir/all.json"])
    check(res.rc == 0, f"combine dir -o dir/all.json (first time)\n  {res.describe()}")
    res = t.forktrace(["combine", "dir", "-o", "dir/all.json"])
    check(res.rc == 2, f"combine dir -o dir/all.json (again): exit {res.rc}\n  {res.describe()}")
    # What is not the same file goes on: a report beside the traces.
    for _ in range(2):
        res = t.forktrace(["report", "dir", "-o", "dir/r.html"])
        check(res.rc == 0, f"report dir -o dir/r.html\n  {res.describe()}")


@test
def test_output_dir_moved(t):
    """The output's directory renamed while the command runs: the trace,
    complete, is in it under its name, and forktrace says where (exit 1).
    It sat unmentioned in OUTPUT.tmp-XXXXXX."""
    t.subdir("d")
    res = t.forktrace(["run", "-o", "d/t.json", "--", "mv", "d", "d2"])
    check(res.rc == 1, f"exit {res.rc}, expected 1\n  {res.describe()}")
    kept = os.path.realpath(t.path("d2", "t.json"))
    check(f"'{kept}'" in res.err, f"forktrace does not say the trace is at {kept}\n"
          f"  {res.describe()}")
    check_trace_file(kept, "moved directory")
    check(sorted(os.listdir(t.path("d2"))) == ["t.json"],
          f"other files in d2: {os.listdir(t.path('d2'))}")
    # A name the program chose is told escaped: it cannot retitle the
    # terminal or forge a line.
    t.subdir("f")
    evil = "f\x1b]0;owned\x07\nforktrace: fake"
    res = t.forktrace(["run", "-o", "f/t.json", "--", "mv", "f", evil])
    check(res.rc == 1 and "\x1b" not in res.err and "\nforktrace: fake" not in res.err,
          f"the moved directory's name is printed raw\n  {res.describe()}")
    check_trace_file(t.path(evil, "t.json"), "moved directory, odd name")
    # Renamed and replaced by a symlink elsewhere (a program of the tree
    # choosing where a root forktrace writes): not followed; the trace
    # stays in the directory it was made in.
    t.subdir("g")
    other = t.subdir("other")
    res = t.forktrace(["run", "-o", "g/t.json", "--", "sh", "-c", "mv g g2 && ln -s other g"])
    check(res.rc == 1 and not os.listdir(other),
          f"the trace followed a symlink put in place of its directory: {os.listdir(other)}\n"
          f"  {res.describe()}")
    check(f"'{os.path.realpath(t.path('g2', 't.json'))}'" in res.err,
          f"forktrace does not say the trace is in g2\n  {res.describe()}")
    check_trace_file(t.path("g2", "t.json"), "directory replaced by a symlink")
    # Renamed and made again: the trace goes where -o named it.
    t.subdir("e")
    res = t.forktrace(["run", "-o", "e/t.json", "--", "sh", "-c", "mv e e2 && mkdir e"])
    check(res.rc == 0, f"exit {res.rc}\n  {res.describe()}")
    check_trace_file(t.path("e", "t.json"), "directory made again")
    check(os.listdir(t.path("e2")) == [], f"files left in e2: {os.listdir(t.path('e2'))}")


@test
def test_output_dir_readonly(t):
    """The output's directory made read-only while the command runs: the
    complete trace is kept in $TMPDIR and forktrace says where (exit 1).
    It sat unmentioned in OUTPUT.tmp-XXXXXX. Runs as nobody: root writes
    into read-only directories."""
    if os.geteuid() != 0:
        raise Skip("needs root to run forktrace as another user")
    base = tempfile.mkdtemp(prefix="ft-ro-", dir="/tmp")
    try:
        os.chmod(base, 0o755)
        d = os.path.join(base, "d")
        tmp = os.path.join(base, "tmp")
        os.mkdir(d)
        os.mkdir(tmp)
        os.chown(d, 65534, 65534)
        os.chown(tmp, 65534, 65534)
        env = dict(os.environ, TMPDIR=tmp)
        p = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                            ft.forktrace_bin(), "run", "-o", "d/t.json", "--", "chmod", "555",
                            "d"], cwd=base, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=30)
        res = ft.Result(p.args, p.returncode, p.stdout, p.stderr, 0, base, None, None)
        if not os.path.exists(os.path.join(base, "d", "..")) or res.rc == 126 or \
                (res.rc == 127 and "forktrace:" not in res.err):
            raise Skip(f"nobody cannot run forktrace here\n  {res.describe()}")
        check(res.rc == 1, f"exit {res.rc}, expected 1\n  {res.describe()}")
        kept = [f for f in os.listdir(tmp) if f.startswith("t.json-")]
        check(len(kept) == 1 and f"'{os.path.join(tmp, kept[0])}'" in res.err,
              f"forktrace does not say where the trace is: {kept}\n  {res.describe()}")
        check_trace_file(os.path.join(tmp, kept[0]), "read-only directory")
        check(os.listdir(d) == [], f"files left in the read-only directory: {os.listdir(d)}")
    finally:
        subprocess.run(["rm", "-rf", base])


@test
def test_killed_no_temporary(t):
    """forktrace killed while the command runs leaves no temporary file
    where the output goes (the file has no name until it is complete)."""
    for out in ("t.json", "t.h5", "t.json.gz"):
        marker = t.path("started")
        started = t.start(["run", "-o", out, "--", "sh", "-c", f"touch {marker}; sleep 30"])
        ft.wait_until(lambda: os.path.exists(marker), "the command to start", started)
        os.killpg(started[0].pid, signal.SIGKILL)
        started[0].communicate()
        os.unlink(marker)
        # OUTPUT.spill/ is not a temporary: it is what gives the run
        # back ('forktrace combine OUTPUT.spill', docs/TRACE_FORMAT.md).
        left = [f for f in os.listdir(t.dir) if f.startswith(out) and f != out + ".spill"]
        check(not left, f"-o {out}: files left after forktrace was killed: {left}")


@test
def test_full_tmpdir_combine(t):
    """combine keeps the inputs' other top-level keys in a file in
    $TMPDIR: when that disk is full, the error names $TMPDIR; it named the
    output, on a disk with room."""
    import json
    ins = []
    for i in (1, 2):
        path = t.path(f"in{i}.json")
        with open(path, "w") as f:
            json.dump({"traceEvents": [{"ph": "i", "name": "x", "pid": i, "tid": i, "ts": 1}],
                       f"meta_{i}": "v" * 5000, "shared": "a" * (3000 * i)}, f)
        ins.append(path)
    with small_tmpfs() as tmp:
        fill(tmp)
        env = dict(os.environ, TMPDIR=tmp)
        for sub, out in (("combine", "c.json"), ("report", "r.html")):
            res = t.forktrace([sub, "-q"] + ins + ["-o", out], env=env)
            check(res.rc == 1 and tmp in res.err and NOSPC in res.err and out not in res.err,
                  f"{sub}: the error must name the full {tmp}, not {out}\n  {res.describe()}")
            check(not os.path.exists(t.path(out)), f"{sub}: {out} was written")


@test
def test_spill_combine_no_tmpdir_file(t):
    """combine and report read agents' spill files into a model that is
    one more input of the merge: nothing of their trace goes to $TMPDIR
    (a temporary JSON file there would need room for the whole trace:
    with 64 KB free, spill files of a larger trace could not be read)."""
    spill = t.subdir("spill")
    os.chmod(spill, 0o700)
    agent = os.path.join(os.path.dirname(ft.forktrace_bin()), "libforktrace-agent.so")
    env = dict(os.environ, LD_PRELOAD=agent, FORKTRACE_SPILL=spill)
    env.pop("FORKTRACE_SOCK", None)
    r = subprocess.run([prog("ev_prog"), "regions", "2", "300", "10"], env=env,
                       stdin=subprocess.DEVNULL, capture_output=True, timeout=30)
    check(r.returncode == 0, f"ev_prog exited {r.returncode}: {r.stderr!r}")
    check(any(f.endswith(".ftspill") for f in os.listdir(spill)), f"nothing spilled in {spill}")
    with small_tmpfs() as tmp:
        filler = fill(tmp, 65536)
        env = dict(os.environ, TMPDIR=tmp)
        for sub, out in (("combine", "c.json"), ("report", "r.html")):
            res = t.forktrace([sub, "-q", spill, "-o", out], env=env)
            check(res.rc == 0, f"{sub} of spill files with 64 KB free in $TMPDIR: exit "
                  f"{res.rc}\n  {res.describe()}")
            left = sorted(set(os.listdir(tmp)) - {os.path.basename(filler)})
            check(not left, f"{sub}: files left in $TMPDIR: {left}")
    size = os.path.getsize(t.path("c.json"))
    check(size > 4 * 65536, f"the spill files' trace is {size} bytes: it would have fit")
    tr = ft.load_trace(t.path("c.json"))
    check(len(tr.find(argv_has="regions")) == 1, f"the spill file was not read:\n{tr.dump()}")


@test
def test_one_output_fails(t):
    """run -o TRACE --report REPORT writes both from one walk of the model:
    when one of them fails (a full disk), the other is still written
    whole where it was asked for, and the failed one goes to $TMPDIR."""
    for failing in ("trace", "report"):
        with small_tmpfs(t.path(f"full-{failing}")) as d:
            filler = fill(d)
            keep = t.subdir(f"keep-{failing}")
            env = dict(os.environ, TMPDIR=keep)
            trace = f"{d}/t.json" if failing == "trace" else t.path(f"t-{failing}.json")
            report = f"{d}/r.html" if failing == "report" else t.path(f"r-{failing}.html")
            res = t.forktrace(["run", "-q", "-o", trace, "--report", report, "--"] +
                              loop_cmd(), env=env)
            failed = trace if failing == "trace" else report
            check_full_disk_error(res, failed, f"{failing} on a full disk")
            left = sorted(set(os.listdir(d)) - {os.path.basename(filler)})
            check(not left, f"{failing}: files left on the full disk: {left}")
            kept = [os.path.join(keep, f) for f in os.listdir(keep)
                    if f.endswith("-" + os.path.basename(failed))]
            check(len(kept) == 1 and kept[0] in res.err,
                  f"{failing}: not kept in $TMPDIR, or not named: {kept}\n  {res.describe()}")
            trace_path = kept[0] if failing == "trace" else trace
            report_path = kept[0] if failing == "report" else report
            check_trace_file(trace_path, f"{failing} fails")
            with open(report_path, "rb") as f:
                check(f.read().rstrip().endswith(b"</html>"), f"{report_path} is cut short")
            doc = ft.load_json(trace_path)
            meta = ft.report_meta(report_path)
            procs = sum(1 for e in doc["traceEvents"] if e.get("name") == "forktrace_process")
            check(meta["processes"] == procs == doc["otherData"]["forktrace"]["processes"] and
                  meta["events"] == len(doc["traceEvents"]),
                  f"{failing} fails: the report has {meta['processes']} processes and "
                  f"{meta['events']} events, the trace {procs} and {len(doc['traceEvents'])}")


@test
def test_spill_dir_device_output(t):
    """forktrace killed with -o naming a device: the agents spill beside
    no device (forktrace.spill/ in the working directory), not into
    DEVICE.spill/ (/dev/null.spill: a directory made in /dev)."""
    if os.geteuid() != 0:
        raise Skip("mknod needs root")
    os.mknod(t.path("null"), 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    tmp = t.subdir("tmp")
    # No process table: every image connects, so it spills once the
    # collector is gone.
    env = dict(os.environ, TMPDIR=tmp, FORKTRACE_TABLE_SLOTS="0")
    # The last image's argv does not fit a table slot either: it connects
    # (and spills) whatever the table does.
    started = t.start(["run", "-o", "null", "--", "sh", "-c",
                       "touch started; while [ ! -e go ]; do sleep 0.01; done; "
                       "/bin/true $(seq 1 5000)"], env=env)
    ft.wait_until(lambda: os.path.exists(t.path("started")), "the command to start", started)
    os.kill(started[0].pid, signal.SIGKILL)
    with open(t.path("go"), "w"):
        pass
    started[0].communicate(timeout=20)
    check(not os.path.exists(t.path("null.spill")), "the agents spilled into null.spill/")
    check(os.path.isdir(t.path("forktrace.spill")) and os.listdir(t.path("forktrace.spill")),
          f"no spill files in forktrace.spill/: {os.listdir(t.dir)}, tmp: {os.listdir(tmp)}")


def run_limited(t, fsize, args, env=None):
    """forktrace args under RLIMIT_FSIZE fsize bytes (prlimit); a Result."""
    p = subprocess.run(["prlimit", f"--fsize={fsize}:{fsize}", ft.forktrace_bin()] + args,
                       cwd=t.dir, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       stdin=subprocess.DEVNULL, timeout=30)
    return ft.Result(p.args, p.returncode, p.stdout, p.stderr, 0, t.dir, None, None)


@test
def test_file_size_limit(t):
    """An output past RLIMIT_FSIZE: exit 1 and EFBIG naming the file (it
    was death by SIGXFSZ, exit 153, the trace lost). COMMAND keeps the
    default SIGXFSZ: it dies of it as it would untraced."""
    efbig = os.strerror(27)  # "File too large"
    src = t.run(loop_cmd(30), out="src.json", expect_rc=0).out_path
    cases = [
        (["run", "-o", "t.json", "--"] + loop_cmd(30), "t.json"),
        (["run", "-o", "t.json.gz", "--level", "1", "--"] + loop_cmd(200), "t.json.gz"),
        (["run", "-o", "t.h5", "--"] + loop_cmd(30), "t.h5"),
        (["combine", src, "-o", "c.json"], "c.json"),
        (["report", src, "-o", "r.html"], "r.html"),
    ]
    for args, out in cases:
        res = run_limited(t, 8192, args)
        check(res.rc == 1 and out in res.err and efbig in res.err,
              f"{' '.join(args)}: exit {res.rc}, expected 1 and {efbig!r}\n  {res.describe()}")
        check(not os.path.exists(t.path(out)), f"{out} was written in part")
        no_temporaries(t.dir, out)
    # COMMAND's own write past the limit kills it, as untraced.
    res = run_limited(t, 8192, ["run", "-o", "big.json", "--", "sh", "-c",
                                "head -c 100000 /dev/zero > big"])
    check(res.rc == 128 + signal.SIGXFSZ, f"COMMAND was not killed by SIGXFSZ: exit {res.rc}\n"
          f"  {res.describe()}")
    check_trace_file(t.path("big.json"), "COMMAND killed by SIGXFSZ")
    # The --max-memory spill file past the limit: kept in memory.
    with small_tmpfs(size="16M") as tmp:
        env = dict(os.environ, TMPDIR=tmp)
        cmd = ["sh", "-c", "set -- $(seq -f %030g 1 1000); "
               "for i in $(seq 20); do /bin/true \"$@\"; done"]
        res = run_limited(t, 256 * 1024, ["run", "--max-memory", "64K", "-o", "/dev/stdout",
                                          "--"] + cmd, env=env)
        check(res.rc == 0 and "cannot spill process data" in res.err and efbig in res.err,
              f"--max-memory past RLIMIT_FSIZE\n  {res.describe()}")


if __name__ == "__main__":
    ft.main()
