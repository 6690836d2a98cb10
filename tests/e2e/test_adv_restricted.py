#!/usr/bin/python3
"""End-to-end tests: processes that give up rights under forktrace.

Programs that drop privileges (setuid to another user), that run under a
seccomp filter refusing or killing on system calls the agent would make,
and peers whose HELLO claims another process's pid. Each checks that the
program runs as it would untraced, and that the trace keeps what could be
recorded and counts what could not.
"""

import os
import socket
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ftcheck as ft  # noqa: E402
from ftcheck import check, prog, test  # noqa: E402

NOBODY = 65534


def need_root():
    if os.geteuid() != 0:
        raise ft.Skip("changing uid needs root")


@test
def test_setuid_drop(t):
    """A root process gives up root for nobody, then starts children that
    exec and start children of their own (a daemon, sudo): every one of
    them is in the trace, instrumented, with its exit code, and nothing is
    lost. Were the socket directory and the table root's alone, the
    children's images could neither connect nor open the table nor spill,
    their own children would be missing, and the summary would say 0
    lost."""
    need_root()
    res = t.run_compare([prog("restricted"), "drop", str(NOBODY)])
    # Each image of nobody waits at its end for the collector's word that
    # its HELLO was checked (FT_HELLO_ACK), a second at most: four of
    # them in turn would take four seconds if the word never came.
    check(res.elapsed < 3.5, f"the run took {res.elapsed:.1f} s")
    tr = res.trace
    root = tr.root()
    leaves = tr.find(argv=["restricted", "leaf"])
    ft.assert_count(leaves, 2, "leaf children of the process that dropped root", tr)
    for leaf in leaves:
        ft.assert_parent(leaf, root, tr)
        ft.assert_exit(leaf, code=7, trace=tr)
        ft.assert_instrumented(leaf, True, tr)
        kids = tr.children(leaf)
        ft.assert_count(kids, 1, f"children of {leaf.describe()}", tr)
        check(kids[0].name == "true", f"child of the leaf is {kids[0].describe()}")
        ft.assert_exit(kids[0], code=0, trace=tr)
        ft.assert_instrumented(kids[0], True, tr)


# --------------------------------------------------------------------------
# Seccomp filters


@test
def test_seccomp_kill_socket(t):
    """A program under a seccomp filter that kills the process on socket()
    and connect() (systemd's SystemCallFilter=) runs as it does untraced,
    though the argv it execs is too long for a process-table slot (which
    made the agent connect, for the EXEC record and for the new image's
    HELLO): the agent makes no connection under a filter, and writes both
    in the table with a shortened argv. A connection would kill the
    process with SIGSYS."""
    res = t.run_compare([prog("restricted"), "killsock", "60"])
    tr = res.trace
    root = tr.root()
    ft.assert_exit(root, code=7, trace=tr)
    check(root.images == 2, f"the root has {root.images} images\n{tr.dump()}")
    leaf = root.image_slices[-1]["args"]
    check(leaf["instrumented"] and leaf["argv"][:3] == ["restricted", "leaf", "arg0000-" + "0" * 90]
          and len(leaf["argv"]) < 62 and leaf.get("argv_truncated") is True,
          f"the leaf image: {leaf}")
    kids = tr.children(root)
    ft.assert_count(kids, 1, f"children of {root.describe()}", tr)
    ft.assert_instrumented(kids[0], True, tr)
    ft.assert_exit(kids[0], code=0, trace=tr)


@test
def test_seccomp_enosys(t):
    """Children under a seccomp filter that makes socket, connect, open(at)
    for writing and mkdir(at) fail with ENOSYS (man-db's sandbox, run by
    dh_installman in every Debian package build with man pages) close
    every fd above 2, fork a child and start /bin/true with fork and exec
    and with posix_spawn: all of them are in the trace with their exit
    codes, and /bin/true is instrumented. The
    agent keeps its fd on the process table from before the filter (which
    closefrom spares), and hands it to the images it execs. Without that
    fd the filtered children could neither connect, nor open the table,
    nor spill: their own children would be missing, and the summary would
    say 0 lost."""
    need_root()
    res = t.run_compare([prog("restricted"), "sandbox"])
    tr = res.trace
    root = tr.root()
    kids = tr.children(root)
    ft.assert_count(kids, 2, "sandboxed children", tr)
    for k in kids:
        ft.assert_exit(k, code=6, trace=tr)
        grand = tr.children(k)
        ft.assert_count(grand, 3, f"children of {k.describe()}", tr)
        codes = sorted(g.exit.get("code") for g in grand)
        check(codes == [0, 0, 5], f"the children of {k.describe()} exited {codes}\n{tr.dump()}")
        true = [g for g in grand if g.name == "true"]
        check(sorted(g.spawn for g in true) == ["fork", "posix_spawn"],
              f"/bin/true under {k.describe()}: {[g.describe() for g in true]}\n{tr.dump()}")
        for g in true:
            ft.assert_instrumented(g, True, tr)


@test
def test_seccomp_libseccomp(t):
    """The same sandbox, made and loaded with libseccomp as man-db does:
    the filter comes with the seccomp system call through syscall(),
    which no hook sees; the agent's seccomp_load keeps the table's fd
    first."""
    need_root()
    res = t.run_compare([prog("restricted"), "libseccomp"])
    if res.rc == 77:
        raise ft.Skip("tests/progs/restricted was built without libseccomp-dev")
    tr = res.trace
    kids = tr.children(tr.root())
    ft.assert_count(kids, 2, "sandboxed children", tr)
    for k in kids:
        ft.assert_exit(k, code=6, trace=tr)
        grand = tr.children(k)
        codes = sorted(g.exit.get("code") for g in grand)
        check(codes == [0, 0, 5], f"the children of {k.describe()} exited {codes}\n{tr.dump()}")
        for g in grand:
            if g.name == "true":
                ft.assert_instrumented(g, True, tr)


@test
def test_seccomp_strict(t):
    """A process that enters seccomp strict mode (read, write, exit and
    sigreturn only) and then faults dies of SIGSEGV as it does untraced:
    the agent stops, and gives the fatal signals back to their default
    action, before the process enters the mode: its handler would make
    system calls there, and the kernel would kill the process with
    SIGKILL."""
    res = t.run_compare([prog("restricted"), "strict"], expect_rc=0)
    tr = res.trace
    kids = tr.children(tr.root())
    ft.assert_count(kids, 1, "children of the root", tr)
    ft.assert_exit(kids[0], signal=11, trace=tr)


# --------------------------------------------------------------------------
# Peers that are not who they say


def mp_int(v):
    return bytes([v]) if 0 <= v < 128 else b"\xcf" + struct.pack(">Q", v)


def mp_str(b):
    return bytes([0xd9, len(b)]) + b


def frame(mtype, fields):
    """A frame of the wire protocol (include/forktrace/wire.h) whose payload
    is the map fields {key: int, bytes or list of bytes}."""
    body = bytes([0x80 | len(fields)])
    for k, v in fields.items():
        body += mp_int(k)
        if isinstance(v, int):
            body += mp_int(v)
        elif isinstance(v, bytes):
            body += mp_str(v)
        else:
            body += bytes([0x90 | len(v)]) + b"".join(mp_str(x) for x in v)
    return b"FT\x01" + bytes([mtype]) + struct.pack("<I", len(body)) + body


def start_ticks(pid):
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[19])




def say_hello_as(pid, ppid, argv0):
    """Connects to the collector and says HELLO as process pid (with its
    start time: the process the collector knows), as a new image named
    argv0 that then exits 99. Returns what the collector answered before
    closing, or None when it kept the connection open."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(ft.agent_var("FORKTRACE_SOCK"))
    ts = time_ns()
    s.sendall(frame(1, {1: ts, 2: pid, 3: pid, 4: ppid, 11: start_ticks(pid),
                        7: [argv0], 16: argv0, 20: 0}) +
              frame(10, {1: ts + 1000, 2: pid, 14: 99}))
    s.settimeout(3)
    try:
        return s.recv(16)
    except socket.timeout:
        return None
    finally:
        s.close()


def time_ns():
    import time
    return time.monotonic_ns()


def liar():
    """Under forktrace: a child says HELLO as this process."""
    import subprocess
    subprocess.run([ft.PYTHON, __file__, "--liar-child", str(os.getpid()),
                    str(os.getppid())], check=True)
    print("liar done", flush=True)


@test
def test_hello_other_pid(t):
    """A traced process that connects and says HELLO as its parent (its
    pid and start time, a new image that exits 99) is refused: the
    connection's credentials name another process. Believed, the liar
    would make the parent seem to have exec'd the impostor and exited
    99."""
    res = t.run([ft.PYTHON, os.path.abspath(__file__), "--liar"], expect_rc=0)
    tr = res.trace
    root = tr.root()
    check(res.out.strip() == "liar done", f"the liar did not finish: {res.out!r}")
    check(not tr.find(name="impostor"), f"the impostor is in the trace\n{tr.dump()}")
    check(root.images == 1, f"the root has {root.images} images\n{tr.dump()}")
    ft.assert_exit(root, code=0, trace=tr)
    warns = [l for l in res.err.splitlines() if f"said HELLO as pid {root.pid} " in l]
    check(len(warns) == 1, f"no warning about the HELLO as pid {root.pid}:\n{res.err}")


@test
def test_pid_namespace(t):
    """A process in a pid namespace of its own says HELLO with its pid
    there (1), which its connection's credentials do not give: it is
    still taken in (its pid in the namespace is the last of its NSpid).
    Every image connects (no process table), so every HELLO is checked."""
    need_root()
    env = dict(os.environ, FORKTRACE_TABLE_SLOTS="0")
    res = t.run([prog("restricted"), "nspid"], env=env, expect_rc=0)
    check("said HELLO" not in res.err, f"a HELLO was refused:\n{res.err}")
    tr = res.trace
    check(tr.find(name="true"), f"no /bin/true in the trace\n{tr.dump()}")
    ft.assert_instrumented(tr.one(name="true"), True, tr)


@test
def test_outsider_refused(t):
    """The socket is open to every uid (for processes that drop
    privileges), but a process of another uid that is not of the traced
    tree is refused at once and leaves nothing in the trace."""
    need_root()
    import subprocess
    started = t.start(t.run_args(["sh", "-c", "tr '\\0' '\\n' < /proc/$$/environ | "
                                  "sed -n 's/^FORKTRACE_SOCK=//p' > sock; "
                                  "while [ ! -e done ]; do sleep 0.01; done"]))
    sock = t.path("sock")
    ft.wait_until(lambda: os.path.exists(sock) and open(sock).read().endswith("\n"),
                  "the command to write the socket's path", started)
    env = dict(os.environ, FORKTRACE_SOCK=open(sock).read().strip())

    def become_nobody():
        os.setgroups([])
        os.setgid(NOBODY)
        os.setuid(NOBODY)

    out = subprocess.run([ft.PYTHON, os.path.abspath(__file__), "--outsider"], env=env,
                         preexec_fn=become_nobody, stdout=subprocess.PIPE, timeout=20)
    open(t.path("done"), "w").close()
    res = t.load(t.finish(started), expect_rc=0)
    check(out.stdout.strip() == b"closed", f"the outsider was not refused: {out.stdout!r}")
    check("not a process of the traced tree" in res.err,
          f"no warning about the outsider:\n{res.err}")
    check(not res.trace.find(name="outsider"), f"the outsider is in the trace")


def outsider():
    """Not traced, of another uid: connects, says HELLO as itself."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(os.environ["FORKTRACE_SOCK"])
    pid = os.getpid()
    try:
        s.sendall(frame(1, {1: time_ns(), 2: pid, 3: pid, 4: os.getppid(),
                            11: start_ticks(pid), 7: [b"outsider"], 16: b"outsider", 20: 0}))
        s.settimeout(10)
        print("closed" if s.recv(16) == b"" else "open")
    except (BrokenPipeError, ConnectionResetError):
        print("closed")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--liar"]:
        liar()
    elif sys.argv[1:2] == ["--liar-child"]:
        say_hello_as(int(sys.argv[2]), int(sys.argv[3]), b"impostor")
    elif sys.argv[1:2] == ["--outsider"]:
        outsider()
    else:
        ft.main()
