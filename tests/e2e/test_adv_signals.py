#!/usr/bin/env python3
"""forktrace against signals and hostile limits: signals sent to it, to its
process group and from a terminal, once COMMAND runs and once only daemons
are left; option values that are not numbers; peers that hold memory with
partial frames; too few file descriptors."""
import fcntl
import glob
import os
import pty
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import termios
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ftcheck as ft  # noqa: E402
from ftcheck import check, test, wait_until  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))

def fail(msg):
    ft.fail(msg)


def counts(t):
    """sig_count's counts, as a dict; {} before it wrote them."""
    try:
        with open(t.path("counts")) as f:
            return {k: int(v) for k, v in (w.split("=") for w in f.read().split())}
    except (OSError, ValueError):
        return {}


def state(pid):
    """The state letter of /proc/PID/stat ('T' stopped), or '' when gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            s = f.read()
    except OSError:
        return ""
    return s[s.rfind(")") + 2:][:1]


def comm(pid):
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


def all_children(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def children(pid):
    """pid's children but forktrace's signal sentinel (named forktrace-sig,
    or forktrace until it has named itself)."""
    return [k for k in all_children(pid) if comm(k) not in ("forktrace-sig", "forktrace")]


def sentinel_of(pid):
    return [k for k in all_children(pid) if comm(k) in ("forktrace-sig", "forktrace")]


def start_sig_count(t, env=None):
    started = t.start(ft.Context.run_args([ft.prog("sig_count")]), env=env)
    wait_until(lambda: os.path.exists(t.path("ready")), "sig_count to start", started)
    kids = children(started[0].pid)
    check(len(kids) == 1, f"forktrace's children: {kids}")
    return started, kids[0]


def end_sig_count(t, started, expect):
    with open(t.path("done"), "w"):
        pass
    res = t.finish(started, timeout=20)
    got = counts(t)
    want = {"INT": 0, "TERM": 0, "HUP": 0, "QUIT": 0, "CONT": 0, "USR1": 0}
    want.update(expect)
    check(got == want, f"COMMAND's signal handlers ran {got}, expected {want}\n"
          f"  {res.describe()}")
    t.load(res, expect_rc=0)
    return res


@test
def test_group_signal_once(t):
    """A signal sent to forktrace's process group (kill -TERM -PGID, a
    job-control kill) reaches COMMAND once: forktrace, which gets it too,
    does not pass it on. One sent to forktrace alone is passed on, once
    (SIGQUIT and SIGUSR1 too: their default action would kill forktrace)."""
    started, cmd = start_sig_count(t)
    pgid = started[0].pid
    check(os.getpgid(cmd) == pgid, "COMMAND is not in forktrace's process group")
    os.killpg(pgid, signal.SIGTERM)
    wait_until(lambda: counts(t).get("TERM", 0) >= 1, "COMMAND to count SIGTERM", started)
    # A signal to forktrace alone; once COMMAND counted it, any copy of
    # the group's SIGTERM forktrace passed on has been delivered too.
    os.kill(pgid, signal.SIGHUP)
    wait_until(lambda: counts(t).get("HUP", 0) >= 1, "COMMAND to count SIGHUP", started)
    check(counts(t).get("TERM") == 1, f"the group's SIGTERM reached COMMAND twice: {counts(t)}")
    os.kill(pgid, signal.SIGTERM)
    wait_until(lambda: counts(t).get("TERM", 0) >= 2, "the second SIGTERM", started)
    os.killpg(pgid, signal.SIGINT)
    wait_until(lambda: counts(t).get("INT", 0) >= 1, "COMMAND to count SIGINT", started)
    os.kill(pgid, signal.SIGQUIT)
    wait_until(lambda: counts(t).get("QUIT", 0) >= 1, "COMMAND to count SIGQUIT", started)
    # SIGUSR1 to forktrace alone goes to COMMAND (its default action would
    # kill forktrace: no trace).
    os.kill(pgid, signal.SIGUSR1)
    wait_until(lambda: counts(t).get("USR1", 0) >= 1, "COMMAND to count SIGUSR1", started)
    os.killpg(pgid, signal.SIGUSR1)
    wait_until(lambda: counts(t).get("USR1", 0) >= 2, "COMMAND to count SIGUSR1 again", started)
    end_sig_count(t, started, {"TERM": 2, "HUP": 1, "INT": 1, "QUIT": 1, "USR1": 2})


@test
def test_terminal_keys(t):
    """In an interactive bash on a real terminal (a pty, as `script` or tmux
    give): Ctrl-C and Ctrl-\\ reach COMMAND once and leave forktrace
    running (SIGQUIT's default action would kill forktrace: no trace);
    Ctrl-Z stops COMMAND and forktrace, `fg` resumes both; the trace is
    written."""
    master, slave = pty.openpty()

    def preexec():
        os.setsid()
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    env = dict(os.environ, PS1="$ ", TERM="dumb", HISTFILE="/dev/null")
    sh = subprocess.Popen(["bash", "--norc", "--noprofile", "-i"], cwd=t.dir, stdin=slave,
                          stdout=slave, stderr=slave, preexec_fn=preexec, env=env)
    os.close(slave)
    screen = bytearray()

    def pump():
        while True:
            r, _, _ = select.select([master], [], [], 0)
            if not r:
                return
            try:
                chunk = os.read(master, 4096)
            except OSError:
                return
            if not chunk:
                return
            screen.extend(chunk)

    def until(cond, what):
        def c():
            pump()
            return cond()
        try:
            wait_until(c, what)
        except AssertionError as e:
            fail(f"{e}\nterminal: {bytes(screen)[-3000:]!r}")

    try:
        cmd = " ".join(ft.Context.run_args([ft.prog("sig_count")]))
        os.write(master, f"{ft.forktrace_bin()} {cmd}\n".encode())
        until(lambda: os.path.exists(t.path("ready")), "sig_count to start")
        ftpid = all_children(sh.pid)[0]
        cmdpid = children(ftpid)[0]
        os.write(master, b"\x03")  # Ctrl-C
        until(lambda: counts(t).get("INT", 0) >= 1, "COMMAND to count Ctrl-C")
        os.write(master, b"\x1c")  # Ctrl-\
        until(lambda: counts(t).get("QUIT", 0) >= 1, "COMMAND to count Ctrl-\\")
        check(state(ftpid) not in ("", "Z"), "Ctrl-\\ killed forktrace")
        os.write(master, b"\x1a")  # Ctrl-Z
        until(lambda: state(cmdpid) == "T" and state(ftpid) == "T" and b"Stopped" in screen,
              "COMMAND and forktrace to stop, bash to say so")
        os.write(master, b"fg\n")
        until(lambda: counts(t).get("CONT", 0) >= 1, "COMMAND to count SIGCONT")
        with open(t.path("done"), "w"):
            pass
        until(lambda: state(ftpid) == "", "forktrace to end")
        # The exit status of `fg` is the job's.
        os.write(master, b"echo RC=$?\n")
        until(lambda: b"RC=" in screen.split(b"echo RC=$?")[-1], "bash to print $?")
        rc = bytes(screen).split(b"echo RC=$?")[-1].split(b"RC=")[1].split()[0]
        check(rc == b"0", f"forktrace exited {rc!r}: {bytes(screen)[-3000:]!r}")
        got = counts(t)
        check(got == {"INT": 1, "TERM": 0, "HUP": 0, "QUIT": 1, "CONT": 1, "USR1": 0},
              f"COMMAND's handlers ran {got}")
        tr = ft.load_trace(t.path("trace.json"))
        ft.assert_exit(tr.root(), code=0, trace=tr)
        os.write(master, b"exit\n")
        sh.wait(timeout=10)
    finally:
        if sh.poll() is None:
            sh.kill()
            sh.wait()
        os.close(master)


@test
def test_direct_stop_cont(t):
    """SIGTSTP sent to forktrace alone stops COMMAND with it (not forktrace
    alone); SIGCONT sent to forktrace alone resumes both.
    forktrace runs in a process group of its own in the test's session,
    as a shell's job does (in an orphaned group the kernel stops no one)."""
    argv = [ft.forktrace_bin()] + ft.Context.run_args([ft.prog("sig_count")])
    t0 = time.monotonic()
    p = subprocess.Popen(argv, cwd=t.dir, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, process_group=0)
    started = (p, argv, t.dir, (t0, ft.system_forks()))
    wait_until(lambda: os.path.exists(t.path("ready")), "sig_count to start", started)
    cmd = children(p.pid)[0]
    os.kill(p.pid, signal.SIGTSTP)
    wait_until(lambda: state(cmd) == "T" and state(p.pid) == "T", "COMMAND and forktrace to stop",
             started)
    os.kill(p.pid, signal.SIGCONT)
    wait_until(lambda: counts(t).get("CONT", 0) >= 1, "COMMAND to count SIGCONT", started)
    check(state(cmd) != "T", "COMMAND still stopped")
    end_sig_count(t, started, {"CONT": 1})


@test
def test_cgroup_sweep_once(t):
    """systemd stops a unit (KillMode=control-group) by sending SIGTERM to
    its main process, then to every other process of the cgroup in turn:
    COMMAND gets it once (forktrace passed on its own copy at once, before
    systemd had reached COMMAND: twice)."""
    started, cmd = start_sig_count(t)
    pid = started[0].pid
    sentinel = sentinel_of(pid)
    check(len(sentinel) == 1, f"forktrace's sentinel: {sentinel}")
    os.kill(pid, signal.SIGTERM)
    # systemd reads cgroup.procs between the main process and the rest.
    time.sleep(0.005)
    for p in sentinel + [cmd]:
        os.kill(p, signal.SIGTERM)
    wait_until(lambda: counts(t).get("TERM", 0) >= 1, "COMMAND to count SIGTERM", started)
    # A copy passed on comes within RSIG_DEFER_MS (100 ms); SIGHUP to
    # forktrace alone comes after it.
    os.kill(pid, signal.SIGHUP)
    wait_until(lambda: counts(t).get("HUP", 0) >= 1, "COMMAND to count SIGHUP", started)
    end_sig_count(t, started, {"TERM": 1, "HUP": 1})


def start_daemon_run(t, env=None):
    """forktrace run -- daemonize: once it returns the started run and the
    daemon's pid, COMMAND has exited and been reaped, only the daemon
    (sleep 30) is left: forktrace waits for it."""
    pidfile = t.path("daemon.pid")
    started = t.start(ft.Context.run_args([ft.prog("daemonize"), pidfile]), env=env)
    wait_until(lambda: os.path.exists(pidfile) and open(pidfile).read().endswith("\n"),
             "the daemon's pid file", started)
    daemon = int(open(pidfile).read())
    t.expected_leftovers.add(daemon)
    wait_until(lambda: children(started[0].pid) == [daemon],
             "COMMAND to be reaped, the daemon left", started)
    return started, daemon


def kill_quietly(pid):
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass


@test
def test_signal_ends_wait(t):
    """Once COMMAND has exited and forktrace waits for a daemon, SIGINT ends
    the wait as --wait-timeout does: the daemon is marked running, the
    trace is written, the exit code is COMMAND's (ignored, the signal
    would leave SIGKILL, which loses the trace, as the only way to stop
    forktrace)."""
    daemon = None
    try:
        started, daemon = start_daemon_run(t)
        # Not a reason to stop (nor to die, as it was).
        os.kill(started[0].pid, signal.SIGUSR1)
        os.kill(started[0].pid, signal.SIGINT)
        res = t.finish(started, timeout=10)
        check(res.elapsed < 8, f"forktrace took {res.elapsed:.1f} s")
        check("SIGINT: no longer waiting" in res.err, f"no message\n  {res.describe()}")
        t.load(res, expect_rc=0, allow_running=True, leftovers_ok=True)
        d = res.trace.by_host_pid.get(daemon, [])
        ft.assert_count(d, 1, "daemons", res.trace)
        ft.assert_exit(d[0], kind="running", trace=res.trace)
        ft.assert_exit(res.trace.root(), code=0, trace=res.trace)
    finally:
        if daemon:
            kill_quietly(daemon)


@test
def test_second_signal_aborts(t):
    """A second signal while forktrace waits (or writes) ends it at once, by
    that signal, without a trace and without leaving its temporary files:
    the output's temporary, the socket directory, the process table."""
    # Short: forktrace puts the socket in /tmp when TMPDIR is long.
    tmp = tempfile.mkdtemp(prefix="ft-sig-", dir="/tmp")
    env = dict(os.environ, TMPDIR=tmp)
    daemon = None
    try:
        started, daemon = start_daemon_run(t, env=env)
        pid = started[0].pid
        socks = glob.glob(os.path.join(tmp, "forktrace-*"))
        check(len(socks) == 1, f"socket directories in TMPDIR: {socks}")
        table = os.path.join(socks[0], "table")
        shm = os.path.realpath(table) if os.path.islink(table) else None
        # Both signals are pending when forktrace resumes: SIGINT (the
        # lower number) is taken first.
        os.kill(pid, signal.SIGSTOP)
        wait_until(lambda: state(pid) == "T", "forktrace to stop")
        os.kill(pid, signal.SIGINT)
        os.kill(pid, signal.SIGTERM)
        os.kill(pid, signal.SIGCONT)
        res = t.finish(started, timeout=10)
        check(res.rc == -signal.SIGTERM, f"forktrace exited {res.rc}, expected death by "
              f"SIGTERM\n  {res.describe()}")
        check("stopped without writing the trace" in res.err, f"no message\n  {res.describe()}")
        left = [f for f in os.listdir(t.dir) if f.startswith("trace.json")]
        check(not left, f"left in the directory: {left}")
        check(not os.listdir(tmp), f"left in TMPDIR: {os.listdir(tmp)}")
        if shm:
            check(not os.path.exists(os.path.dirname(shm)), f"{shm} was left")
    finally:
        if daemon:
            kill_quietly(daemon)
        shutil.rmtree(tmp, ignore_errors=True)


@test
def test_inherited_dispositions(t):
    """COMMAND gets the signal dispositions and mask forktrace was given:
    under nohup (SIGHUP ignored), as a background job of a script (SIGINT,
    SIGQUIT ignored), with SIGPIPE ignored or SIGUSR1 blocked, as without
    forktrace; forktrace's own handlers and SIGPIPE do not leak into it."""
    bits = {"HUP": 1 << 0, "INT": 1 << 1, "QUIT": 1 << 2, "PIPE": 1 << 12, "USR1": 1 << 9}

    def status(res):
        f = dict(line.split(":", 1) for line in res.out.splitlines() if ":" in line)
        return int(f["SigIgn"], 16), int(f["SigBlk"], 16)

    def preexec():
        for s in (signal.SIGHUP, signal.SIGINT, signal.SIGQUIT, signal.SIGPIPE):
            signal.signal(s, signal.SIG_IGN)
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})

    argv = [ft.forktrace_bin()] + ft.Context.run_args(["cat", "/proc/self/status"])
    t0 = time.monotonic()
    p = subprocess.Popen(argv, cwd=t.dir, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, preexec_fn=preexec, start_new_session=True)
    res = t.finish((p, argv, t.dir, (t0, ft.system_forks())))
    t.load(res, expect_rc=0)
    ign, blk = status(res)
    for name in ("HUP", "INT", "QUIT", "PIPE"):
        check(ign & bits[name], f"SIG{name} was ignored for forktrace, not for COMMAND "
              f"(SigIgn {ign:x})")
    check(blk & bits["USR1"], f"SIGUSR1 was blocked for forktrace, not for COMMAND "
          f"(SigBlk {blk:x})")
    res = t.run(["cat", "/proc/self/status"], out="plain.json", expect_rc=0)
    ign, blk = status(res)
    check(not ign & (bits["HUP"] | bits["INT"] | bits["QUIT"] | bits["PIPE"]),
          f"COMMAND got ignored signals from forktrace (SigIgn {ign:x})")
    check(blk == 0, f"COMMAND got blocked signals from forktrace (SigBlk {blk:x})")


@test
def test_signal_from_tree(t):
    """A signal the traced tree sends to forktrace (COMMAND signalling its
    parent) is not passed back to COMMAND: passed back, it would kill it."""
    res = t.run(["sh", "-c", "kill -TERM $PPID; sleep 0.5; echo alive"], expect_rc=0)
    check(res.out.strip() == "alive", f"COMMAND did not survive\n  {res.describe()}")
    # From deeper in the tree: forktrace follows the sender's parents in
    # /proc, so the sender stays until the signal has been handled (one
    # that is gone and reaped by then cannot be followed: RELIABILITY.md).
    res = t.run(["sh", "-c", 'P=$PPID; sh -c "kill -TERM $P; sleep 0.5"; echo alive'],
                expect_rc=0)
    check(res.out.strip() == "alive",
          f"COMMAND did not survive its child's signal to forktrace\n  {res.describe()}")


@test
def test_numeric_options(t):
    """Every numeric option takes the whole value or refuses it with a
    usage error before COMMAND runs: no NaN, sign, blank, hexadecimal,
    trailing junk or overflow slips through as some other number. inf and
    huge --wait-timeout values wait (they must not time out at once)."""
    marker = t.path("ran")
    cmd = ["sh", "-c", f": > {marker}"]
    bad = {
        "--wait-timeout": ["nan", "NaN", "-1", "-0", " 5", "5x", "0x10", "", ".", "1e", "+1",
                           "5 ", "infx", "1,5"],
        "--max-memory": ["-1", "0", "5x", " 5", "+5", "0x10", "99999999999999999999999",
                         "17179869184G", "1.5G", "M", ""],
        "--level": [" 5", "+5", "0", "10", "-1", "99999999999999999999", "5x", ""],
    }
    for opt, values in bad.items():
        for v in values:
            res = t.forktrace(["run", "-q", "-o", "t.json", opt, v, "--"] + cmd)
            check(res.rc == 2, f"{opt} {v!r}: forktrace exited {res.rc}, expected the usage "
                  f"error 2\n  {res.describe()}")
            check(opt in res.err and repr(v)[1:-1] in res.err,
                  f"{opt} {v!r}: the error does not name the option and the value\n"
                  f"  {res.describe()}")
            check(not os.path.exists(marker), f"{opt} {v!r}: COMMAND ran\n  {res.describe()}")
            check(not os.path.exists(t.path("t.json")), f"{opt} {v!r}: a trace was written")
    for v in ("0", "+3", " 4", "10", "x"):
        res = t.forktrace(["combine", "--level", v, "-o", "c.json", "none.json"])
        check(res.rc == 2 and "--level" in res.err,
              f"combine --level {v!r}: exited {res.rc}\n  {res.describe()}")
    for v in ("512M", "1k", "64KB", "1T", "18446744073709551615"):
        res = t.run(["true"], opts=["--max-memory", v], out="m.json", quiet=True, expect_rc=0)
    # A background child outlives the shell by 0.6 s: a timeout that is
    # really "wait" lets it end; one taken as 0 cuts it off as running.
    for v in ("inf", "INFINITY", "1e300", "99999999999999999999999999", "30"):
        res = t.run(["sh", "-c", "sleep 0.6 & exit 0"], opts=["--wait-timeout", v],
                    out="w.json", expect_rc=0, quiet=True)
        sl = res.trace.one(name="sleep")
        ft.assert_exit(sl, code=0, trace=res.trace)
        check(res.elapsed >= 0.5, f"--wait-timeout {v}: returned after {res.elapsed:.2f} s")


HOLD_PEER = r"""
import fcntl, os, socket, struct, sys, termios, time
n, size = int(sys.argv[1]), int(sys.argv[2])
ft = os.getppid()

def rss(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024

base = rss(ft)
conns = []
for _ in range(n):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    # The agent hides its variables from os.environ, not from the
    # process's initial environment.
    s.connect(dict(e.split(b"=", 1) for e in open("/proc/self/environ", "rb").read()
                   .split(bytes(1)) if b"=" in e)[b"FORKTRACE_SOCK"].decode())
    # A HELLO header announcing 16 MiB, then never the whole payload.
    s.sendall(b"FT\x01\x01" + struct.pack("<I", 16 * 1024 * 1024))
    conns.append(s)
chunk = b"\x00" * (1 << 20)
live = list(conns)
for _ in range(size >> 20):
    for s in list(live):
        try:
            s.sendall(chunk)
        except OSError:
            live.remove(s)
# Everything sent is read (or the connection was closed) before RSS counts.
deadline = time.monotonic() + 20
while live and time.monotonic() < deadline:
    live = [s for s in live if fcntl.ioctl(s, termios.TIOCOUTQ, b"\0" * 4) != b"\0" * 4]
    time.sleep(0.01)
maps = open(f"/proc/{ft}/maps").read()
print(f"grew {rss(ft) - base} asan {int('libasan' in maps)} stuck {len(live)}")
for s in conns:
    s.close()
"""


@test
def test_partial_frames_capped(t):
    """Twenty connections that each announce a 16 MiB frame and send 8 MiB
    of it: the collector holds at most 64 MiB of unfinished frames (it
    held all 160 MiB, and 320 MiB for the whole frames), closes the
    connections that hold the most with a few warnings and a count, and
    the trace of the real processes is whole."""
    peer = t.path("hold_peer.py")
    with open(peer, "w") as f:
        f.write(HOLD_PEER)
    res = t.run([ft.PYTHON, peer, "20", str(8 << 20)], expect_rc=0, timeout=40)
    words = res.out.split()
    check(words[:1] == ["grew"], f"the peer did not finish\n  {res.describe()}")
    grew, asan, stuck = int(words[1]), int(words[3]), int(words[5])
    check(stuck == 0, f"{stuck} connections neither read nor closed\n  {res.describe()}")
    # ASan's quarantine keeps freed memory: only the plain build is weighed.
    if not asan:
        check(grew < 96 << 20, f"the collector grew by {grew >> 20} MiB holding unfinished "
              f"frames\n  {res.describe()}")
    warns = [l for l in res.err.splitlines() if "of an unfinished frame" in l]
    check(1 <= len(warns) <= 3, f"{len(warns)} warnings (expected 1 to 3)\n  {res.describe()}")
    total = [l for l in res.err.splitlines() if "connections in all were closed" in l]
    check(len(total) == 1, f"no count of the closed connections\n  {res.describe()}")
    ft.assert_exit(res.trace.root(), code=0, trace=res.trace)


@test
def test_few_fds(t):
    """With 3 to 30 file descriptors allowed (ulimit -n), forktrace run
    either traces the tree or says it has too few, exit 1, before COMMAND
    starts: never a crash (libuv aborted, or used a loop whose setup had
    failed), a hang, or temporary files left."""
    import resource
    worked = []
    for n in range(3, 31):
        d = t.subdir(f"n{n}")

        def limit(n=n):
            resource.setrlimit(resource.RLIMIT_NOFILE, (n, n))

        argv = [ft.forktrace_bin()] + ft.Context.run_args([ft.prog("fork_tree")])
        t0 = time.monotonic()
        p = subprocess.Popen(argv, cwd=d, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, preexec_fn=limit, start_new_session=True)
        res = t.finish((p, argv, d, (t0, ft.system_forks())), timeout=20)
        # With no fd to spare, the dynamic loader cannot open forktrace's
        # libraries: its own clear error, before forktrace runs.
        if res.rc == 127 and "error while loading shared libraries" in res.err:
            continue
        check(res.rc in (0, 1), f"ulimit -n {n}: forktrace exited {res.rc}\n  {res.describe()}")
        if res.rc == 1:
            check("forktrace: too few file descriptors" in res.err,
                  f"ulimit -n {n}: exit 1 without saying why\n  {res.describe()}")
            check(not os.listdir(d), f"ulimit -n {n}: left {os.listdir(d)}")
            continue
        t.load(res, expect_rc=0)
        check(len(res.trace.procs) == 15, f"ulimit -n {n}: {len(res.trace.procs)} processes")
        worked.append(n)
    check(worked and worked[-1] == 30 and worked == list(range(worked[0], 31)),
          f"forktrace worked with ulimit -n {worked}: not from some limit up to 30")


GARBAGE_PEER = r"""
import os, socket
# The agent hides its variables from os.environ, not from the process's
# initial environment.
path = dict(e.split(b"=", 1) for e in open("/proc/self/environ", "rb").read()
            .split(bytes(1)) if b"=" in e)[b"FORKTRACE_SOCK"].decode()
for i in range(200):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    s.sendall(b"GET / HTTP/1.0\r\n\r\n")
    s.settimeout(10)
    assert s.recv(16) == b""
    s.close()
print("done")
"""


@test
def test_reject_flood(t):
    """Two hundred connections of garbage: ten warnings, then one count at
    the end (there was a warning line per connection)."""
    peer = t.path("garbage_peer.py")
    with open(peer, "w") as f:
        f.write(GARBAGE_PEER)
    res = t.run([ft.PYTHON, peer], expect_rc=0)
    check(res.out.strip() == "done", f"the peer did not finish\n  {res.describe()}")
    warns = [l for l in res.err.splitlines() if "closing its connection" in l]
    check(len(warns) == 10, f"{len(warns)} warnings, expected 10\n  {res.describe()}")
    total = [l for l in res.err.splitlines()
             if "200 connections in all were closed for protocol errors" in l]
    check(len(total) == 1, f"no count of the 200 connections\n  {res.describe()}")


@test
def no_orphan_left(ctx):
    """Nothing forktrace starts outlives it: its signal sentinel went to the
    reaper above forktrace (a container's init, an outer forktrace, here
    this test as a child subreaper) as an orphan it never made."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    check(libc.prctl(36, 1, 0, 0, 0) == 0, "PR_SET_CHILD_SUBREAPER failed")  # PR_SET_CHILD_SUBREAPER
    res = ctx.forktrace(ctx.run_args(["/bin/true"], quiet=True))
    check(res.rc == 0, f"forktrace failed\n  {res.describe()}")
    me = str(os.getpid())
    mine = []
    for stat in glob.glob("/proc/[0-9]*/stat"):
        try:
            with open(stat) as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[1] == me:
            mine.append(stat.split("/")[2])
    check(not mine, f"processes left to the reaper above forktrace: {mine}")


if __name__ == "__main__":
    ft.main()
