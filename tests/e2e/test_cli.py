#!/usr/bin/python3
"""End-to-end tests of forktrace's command line: exit codes, errors before
the command starts, --wait-timeout, signals to forktrace, gzip output,
--help and -q."""

import os
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ftcheck as ft  # noqa: E402
from ftcheck import check, prog, test  # noqa: E402

from test_progs import check_fork_tree  # noqa: E402


def files_in(d):
    return sorted(os.listdir(d))


def check_no_garbage(t, res, allowed):
    """The directory holds nothing but the allowed files; a trace, if one
    was written, is a complete, valid trace that says what happened."""
    extra = [f for f in files_in(res.cwd) if f not in allowed and f != "trace.json"]
    check(not extra, f"unexpected files left in {res.cwd}: {extra}\n  {res.describe()}")
    path = os.path.join(res.cwd, "trace.json")
    if os.path.exists(path):
        tr = ft.load_trace(path)
        check(tr.meta.get("exit_status") == res.rc,
              f"the trace's exit_status {tr.meta.get('exit_status')} is not {res.rc}")


@test
def test_cmd_not_found(t):
    for cmd in ("forktrace-no-such-command-xyz", "/nonexistent-dir/forktrace-no-such-cmd"):
        d = t.subdir(os.path.basename(cmd))
        res = t.forktrace(["run", "-o", "trace.json", "--", cmd, "arg"], cwd=d)
        check(res.rc == 127, f"exit {res.rc}, expected 127 for a missing command\n  {res.describe()}")
        check(cmd in res.err, f"the message does not name {cmd!r}\n  {res.describe()}")
        check(res.stdout == b"", f"stdout is not empty: {res.stdout!r}")
        check_no_garbage(t, res, allowed=())


@test
def test_cmd_not_executable(t):
    script = t.path("not-executable.sh")
    with open(script, "w") as f:
        f.write("#!/bin/sh\ntouch ran.marker\n")
    os.chmod(script, 0o644)
    res = t.forktrace(["run", "-o", "trace.json", "--", "./not-executable.sh"])
    check(res.rc == 126, f"exit {res.rc}, expected 126 for a non-executable command\n"
          f"  {res.describe()}")
    check("not-executable.sh" in res.err, f"the message does not name the file\n  {res.describe()}")
    check_no_garbage(t, res, allowed=("not-executable.sh",))


def unwritable(t, out):
    """The output is checked before the command starts: the command (which
    would create a marker file) must not run."""
    marker = t.path("ran.marker")
    res = t.forktrace(["run", "-o", out, "--", "touch", marker])
    check(res.rc == 1, f"exit {res.rc} with -o {out}, expected 1\n  {res.describe()}")
    check(out in res.err, f"the message does not name {out}\n  {res.describe()}")
    check(not os.path.exists(marker), f"the command ran although -o {out} cannot be written "
          f"(the output must be checked before the command starts)\n  {res.describe()}")


@test
def test_unwritable_output(t):
    unwritable(t, "/nonexistent-dir/x.json")


@test
def test_output_is_directory(t):
    unwritable(t, t.subdir("a-directory"))


@test
def test_unknown_option(t):
    marker = t.path("ran.marker")
    cases = [
        (["run", "--no-such-option", "--", "touch", marker], "--no-such-option"),
        (["no-such-subcommand"], "no-such-subcommand"),
        (["run"], None),  # no command
        (["run", "--wait-timeout", "soon", "--", "touch", marker], "soon"),
    ]
    for args, named in cases:
        res = t.forktrace(args)
        check(res.rc == 2, f"forktrace {' '.join(args)}: exit {res.rc}, expected 2\n"
              f"  {res.describe()}")
        if named:
            check(named in res.err, f"the message does not name {named!r}\n  {res.describe()}")
        check(res.err.strip(), f"no message for bad usage\n  {res.describe()}")
        check(not os.path.exists(marker), f"the command ran despite bad usage: {args}")
        check(not os.path.exists(t.path("forktrace.json")), "a trace was written for bad usage")


@test
def test_wait_timeout(t):
    """A daemon sleeping 30 s: with --wait-timeout 1 forktrace returns in a
    few seconds, the daemon is marked running, the trace is written."""
    pidfile = t.path("daemon.pid")
    daemon = None
    try:
        res = t.forktrace(ft.Context.run_args([prog("daemonize"), pidfile],
                                              opts=["--wait-timeout", "1"]), timeout=25)
        with open(pidfile) as f:
            daemon = int(f.read())
        t.expected_leftovers.add(daemon)
        check(res.elapsed < 8, f"forktrace took {res.elapsed:.1f} s with --wait-timeout 1")
        check(res.elapsed >= 0.9, f"forktrace returned after {res.elapsed:.2f} s: it did not "
              f"wait the 1 s for the daemon")
        t.load(res, expect_rc=0, allow_running=True, leftovers_ok=True)
        tr = res.trace
        root = tr.root()
        ft.assert_exit(root, code=0, trace=tr)
        a = [k for k in tr.children(root)]
        ft.assert_count(a, 1, "children of the root", tr)
        ft.assert_exit(a[0], code=0, trace=tr)
        ds = tr.by_host_pid.get(daemon, [])
        ft.assert_count(ds, 1, f"processes with the daemon's pid {daemon}", tr)
        d = ds[0]
        check(d.name == "sleep" and d.argv == ["sleep", "30"], f"daemon: {d.describe()}")
        ft.assert_parent(d, a[0], tr)
        ft.assert_exit(d, kind="running", trace=tr)
        for p in tr.all():
            if p is not d:
                check(p.exit.get("kind") == "code", f"{p.describe()} should have ended")
        alive = os.path.exists(f"/proc/{daemon}")
        print(f"note: the daemon was {'still' if alive else 'no longer'} alive after forktrace")
    finally:
        if daemon:
            try:
                os.kill(daemon, signal.SIGKILL)
            except OSError:
                pass


@test
def test_sigterm_forktrace(t):
    """SIGTERM to forktrace reaches the command, forktrace exits 143 and
    still writes the trace."""
    started = t.start(ft.Context.run_args([prog("term_wait")]))
    p = started[0]
    # Signals that come before COMMAND runs wait for it (forktrace blocks
    # them until then): "started" says term_wait's handler is in place.
    ft.wait_until(lambda: os.path.exists(t.path("started")), "term_wait to start", started)
    os.kill(p.pid, signal.SIGTERM)
    res = t.finish(started, timeout=20)
    check(os.path.exists(t.path("got-term")), f"the command did not get SIGTERM\n  {res.describe()}")
    t.load(res, expect_rc=143)
    tr = res.trace
    root = tr.root()
    check(root.name == "term_wait", f"root: {root.describe()}")
    ft.assert_exit(root, signal=15, trace=tr)


@test
def test_gzip_output(t):
    res = t.run([prog("fork_tree")], out="trace.json.gz", expect_rc=0)
    with open(res.out_path, "rb") as f:
        magic = f.read(2)
    check(magic == b"\x1f\x8b", f"{res.out_path} is not gzip (starts with {magic!r})")
    check(not os.path.exists(t.path("trace.json")), "a plain trace.json was written too")
    check_fork_tree(res.trace)


@test
def test_help(t):
    res = t.forktrace(["--help"])
    check(res.rc == 0, f"forktrace --help exited {res.rc}\n  {res.describe()}")
    check("usage" in res.out.lower() and "run" in res.out,
          f"forktrace --help does not print usage (with the run subcommand) on stdout\n"
          f"  {res.describe()}")
    res = t.forktrace(["run", "--help"])
    check(res.rc == 0, f"forktrace run --help exited {res.rc}\n  {res.describe()}")
    check("usage" in res.out.lower(), f"no usage on stdout\n  {res.describe()}")
    for opt in ("-o", "--wait-timeout", "--max-memory", "-q"):
        check(opt in res.out, f"forktrace run --help does not mention {opt}\n  {res.describe()}")
    check(not os.path.exists(t.path("forktrace.json")), "--help wrote a trace")


@test
def test_quiet(t):
    """-q: no summary line, so stderr is byte for byte the command's."""
    res = t.run_compare([prog("fork_tree")], quiet=True, expect_rc=0)
    check(res.stderr == b"", f"stderr with -q is not empty: {res.stderr!r}")
    check_fork_tree(res.trace)


if __name__ == "__main__":
    ft.main()
