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
    TMPDIR a write to its mapping was SIGBUS: forktrace died, the trace was
    lost. Now the space is reserved first, and what does not fit stays in
    memory, with a warning."""
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
        check(res.spill_lines(), f"no spill summary: {res.err!r}")
        check("cannot spill process data" in res.err and tmp in res.err and NOSPC in res.err,
              f"no warning that the spill file's disk is full\n  {res.describe()}")


@test
def test_full_disk_outputs(t):
    """Every output format on a full disk: exit 1, a message naming the
    file and ENOSPC, no temporary file left. HDF5 died of SIGSEGV (exit
    139) in libhdf5's atexit handler after its failed close."""
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
            for what, args, path in cases:
                if leave > 4096 and not path.endswith((".json", ".h5")):
                    continue  # they fit in 64 KB: they fail with no room only
                res = t.forktrace(args)
                check_full_disk_error(res, path, f"{what} (free: {leave} bytes)")
                left = sorted(set(os.listdir(d)) - {os.path.basename(filler)})
                check(not left, f"{what}: files left on the full disk: {left}")


if __name__ == "__main__":
    ft.main()
