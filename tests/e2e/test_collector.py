#!/usr/bin/env python3
"""The collector against what the traced world can throw at it: broken
peers on its socket, pid reuse, a terminal on stderr."""
import os
import pty
import select
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ftcheck as ft  # noqa: E402
from ftcheck import check, test  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


@test
def test_bad_peer(t):
    """Garbage, an oversized frame, a malformed payload and a message
    before HELLO, each on its own connection: each connection is closed
    with a warning naming the pid, and nothing of the real processes is
    lost."""
    res = t.run([ft.PYTHON, os.path.join(HERE, "bad_peer.py")], expect_rc=0)
    tr = res.trace
    out = res.out.strip().split()
    check(out[:2] == ["bad", "peer"], f"bad_peer did not finish: {res.out!r}")
    peer = int(out[2])
    warnings = [l for l in res.err.splitlines() if "closing its connection" in l]
    check(len(warnings) == 4, f"expected 4 warnings, got {len(warnings)}:\n{res.err}")
    for what in ("without the FT magic", "oversized frame", "malformed message payload",
                 "message before its HELLO"):
        check(any(what in w and f"process {peer} " in w for w in warnings),
              f"no warning about {what!r} naming pid {peer}:\n{res.err}")
    trues = tr.find(name="true")
    ft.assert_count(trues, 3, "/bin/true children", tr)
    me = tr.one(argv_has=os.path.join(HERE, "bad_peer.py"))
    for p in trues:
        ft.assert_parent(p, me, tr)
        ft.assert_exit(p, code=0, trace=tr)
        ft.assert_instrumented(p, True, tr)


@test
def test_pid_reuse(t):
    """Two processes with the same host pid stay two processes: each with
    its own exit status, one of them under a trace pid no real process can
    have, both keeping the host pid in their records."""
    if os.geteuid() != 0:
        raise ft.Skip("forcing pid reuse needs root (/proc/sys/kernel/ns_last_pid)")
    res = t.forktrace(t.run_args([ft.PYTHON, os.path.join(HERE, "pid_reuse.py")]))
    if res.rc == 77:
        raise ft.Skip("another process took the pid every time: " + res.err)
    lines = res.out.splitlines()
    reused = int(lines[0].split()[1])
    res.reused_pids = {reused} | {int(p) for p in lines[1].split()[1:]}
    res = t.load(res, expect_rc=0)
    tr = res.trace
    twins = [p for p in tr.all() if p.pid == reused]
    ft.assert_count(twins, 2, f"processes with host pid {reused}", tr)
    codes = sorted(p.exit["code"] for p in twins)
    check(codes == [11, 22], f"exit codes of the two pid-{reused} processes: {codes}")
    check(len({p.tpid for p in twins}) == 2, "the two processes share a trace pid")
    check(any(p.tpid >= 4194304 for p in twins), "the later process was not given a trace "
          f"pid above pid_max: {[p.tpid for p in twins]}")
    root = tr.root()
    for p in twins:
        ft.assert_parent(p, root, tr)


@test
def test_progress_on_terminal(t):
    """On a terminal, forktrace shows live progress on stderr and clears
    it before the summary; into a pipe, it writes no progress at all (the
    other tests read stderr from pipes)."""
    master, slave = pty.openpty()
    # COMMAND runs until the progress line is on the terminal (or, if it
    # never comes, the deadline): then it is let go through the FIFO.
    go = t.path("go")
    os.mkfifo(go)

    def let_go():
        try:
            fd = os.open(go, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:  # the shell has not opened it yet
            return False
        os.write(fd, b"\n")
        os.close(fd)
        return True
    argv = [ft.forktrace_bin()] + t.run_args(["sh", "-c", "read x < go; /bin/true"])
    p = subprocess.Popen(argv, cwd=t.dir, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=slave, start_new_session=True)
    os.close(slave)
    data = b""
    released = False
    give_up = time.monotonic() + 20
    deadline = give_up + 10
    while time.monotonic() < deadline:
        if not released and (b"running" in data or time.monotonic() > give_up):
            released = let_go()
        r, _, _ = select.select([master], [], [], 0.05)
        if r:
            try:
                chunk = os.read(master, 4096)
            except OSError:
                break
            if not chunk:
                break
            data += chunk
        elif p.poll() is not None:
            break
    p.wait(timeout=30)
    os.close(master)
    check(p.returncode == 0, f"forktrace exited {p.returncode}: {data!r}")
    check(b"\r\x1b[Kforktrace: " in data and b"running" in data,
          f"no progress line on the terminal: {data!r}")
    summary = data.rsplit(b"\r\x1b[K", 1)[-1]
    check(b"trace written to" in summary, f"the summary does not follow the cleared "
          f"progress line: {data!r}")
    res = t.run(["sh", "-c", "sleep 0.5"], out="piped.json", expect_rc=0)
    check(b"\x1b[K" not in res.stderr, f"progress escape codes written into a pipe: {res.err!r}")


if __name__ == "__main__":
    ft.main()
