#!/usr/bin/env python3
"""The process table (include/forktrace/wire.h): short-lived images speak
through a shared file instead of a connection each. Every scenario checks
the trace is as complete as over connections, and counts the connections
the agents made (strace on the whole run) to show which path was taken."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ftcheck as ft  # noqa: E402
from ftcheck import check, test  # noqa: E402


def traced_connects(t, cmd, env=None, sub="run"):
    """forktrace run -- cmd under strace -f: (Result with trace, number of
    connections the agents made to the collector)."""
    d = t.subdir(sub)
    log = os.path.join(d, "strace.log")
    full_env = dict(os.environ)
    full_env.update(env or {})
    argv, p = ft.strace_forktrace_run(cmd, d, log, "connect", env=full_env)
    with open(log) as f:
        lines = f.readlines()
    # The agents' connections, those that were made: forktrace itself
    # tries the sockets of runs that were killed, which refuse, to prove
    # them dead.
    connects = sum(1 for line in lines if "collector.sock" in line and "connect(" in line
                   and line.rstrip().endswith("= 0"))
    res = ft.Result(argv, p.returncode, p.stdout, p.stderr, 0, d, None, p.pid)
    res.out_path = os.path.join(d, "trace.json")
    res.trace = ft.load_trace(res.out_path)
    ft.check_common(res, quiet=True)
    return res, connects


def check_loop(tr, n, what):
    """The root sh and its n children /bin/true, each exited 0."""
    sh = tr.root()
    kids = [p for p in tr.children(sh) if p.name == "true"]
    ft.assert_count(kids, n, f"/bin/true children ({what})", tr)
    for p in kids:
        ft.assert_exit(p, code=0, trace=tr)
        ft.assert_instrumented(p, True, tr)
        last = p.image_slices[-1]
        check((last.get("args") or {}).get("argv") == ["/bin/true", "x"],
              f"argv of a child ({what}): {last}")
    return sh, kids


@test
def test_table_quiet_images(t):
    """40 children that only start and exit: none connects, and the trace
    holds them as fully as with connections (FORKTRACE_TABLE_SLOTS=0)."""
    cmd = ["sh", "-c", "for i in $(seq 40); do /bin/true x; done; exit 0"]
    res, n = traced_connects(t, cmd, sub="table")
    check(n == 0, f"{n} connections with the table (expected none)")
    check_loop(res.trace, 40, "table")
    res2, n2 = traced_connects(t, cmd, env={"FORKTRACE_TABLE_SLOTS": "0"}, sub="sockets")
    check(n2 >= 41, f"{n2} connections without the table (expected one per image)")
    check_loop(res2.trace, 40, "connections")


@test
def test_table_full(t):
    """A table of 8 slots: the images after it connect, nothing is lost."""
    cmd = ["sh", "-c", "for i in $(seq 30); do /bin/true x; done; exit 0"]
    res, n = traced_connects(t, cmd, env={"FORKTRACE_TABLE_SLOTS": "8"})
    check(n >= 30 - 8, f"only {n} connections with 8 slots for 31 images")
    check_loop(res.trace, 30, "table of 8")


@test
def test_table_continue(t):
    """A shell that starts 300 children fills slot after slot with their
    FORK and WAIT records (CONTINUE): no connection, one image of the
    shell, all 300 children with their parent and status."""
    cmd = ["sh", "-c", "for i in $(seq 300); do /bin/true x; done; exit 0"]
    res, n = traced_connects(t, cmd)
    check(n == 0, f"{n} connections (expected none)")
    tr = res.trace
    sh, kids = check_loop(tr, 300, "continued slots")
    ft.assert_count(sh.image_slices, 1, "images of the shell", tr)
    for p in kids:
        ft.assert_parent(p, sh, tr)


@test
def test_table_resume(t):
    """A shell that wrote 150 children's records in the table, then execs
    with an argv no slot holds: it goes on over a connection (HELLO
    resumed), so the trace has one image of the shell, then the exec'd
    one, and all 150 children with their parent."""
    d = t.subdir("run")
    long_arg = "b" * 6000
    cmd = ["sh", "-c", 'for i in $(seq 150); do /bin/true x; done; exec /bin/true "$LONG_ARG"']
    res, n = traced_connects(t, cmd, env={"LONG_ARG": long_arg})
    check(n == 2, f"{n} connections (expected 2: the shell resuming, the long HELLO)")
    tr = res.trace
    sh, kids = check_loop(tr, 150, "resumed shell")
    names = [(s.get("args") or {}).get("argv") for s in sh.image_slices]
    check(names == [cmd, ["/bin/true", long_arg]],
          f"images of the shell process: {[x and x[:2] for x in names]}")
    cwd = (sh.image_slices[0].get("args") or {}).get("cwd")
    check(cwd == os.path.realpath(d), f"shell cwd {cwd!r}, expected {d!r}")
    for p in kids:
        ft.assert_parent(p, sh, tr)


@test
def test_table_long_argv(t):
    """An argv longer than a slot: that image connects, its argv is whole.
    One of 2.5 KiB (a compiler's, say) still fits a slot: no connection."""
    long_arg, mid_arg = "a" * 6000, "b" * 2500
    cmd = ["sh", "-c", '/bin/true "$LONG_ARG"; /bin/true "$MID_ARG"; /bin/true x; exit 0']
    res, n = traced_connects(t, cmd, env={"LONG_ARG": long_arg, "MID_ARG": mid_arg})
    check(n == 1, f"{n} connections (expected one, the long argv's)")
    tr = res.trace
    for arg in (long_arg, mid_arg):
        whole = tr.find(name="true", pred=lambda p: (p.image_slices[-1].get("args") or {})
                        .get("argv") == ["/bin/true", arg])
        ft.assert_count(whole, 1, f"children with the {len(arg)}-byte argument", tr)
    ft.assert_count(tr.find(name="true"), 3, "/bin/true children", tr)


@test
def test_table_pages_released(t):
    """The slots of images that are gone give their pages back while the
    run goes on: after 300 children, the table file holds far fewer pages
    than the slots made ready."""
    # The header page, the slots never claimed, Python's own slot and
    # what is not yet retired; without the punch-outs, every ready slot.
    retired = 250
    script = """
import os, struct, subprocess, sys, time
for _ in range(300):
    subprocess.run(["/bin/true"], check=True)
env = dict(e.split(b"=", 1) for e in open("/proc/self/environ", "rb").read().split(b"\\0")
           if b"=" in e)  # the agent hides its variables from os.environ
table = os.path.join(os.path.dirname(env[b"FORKTRACE_SOCK"].decode()), "table")

def state():
    with open(table, "rb") as f:
        _, _, slot_size, _, claimed, ready = struct.unpack("<6I", f.read(24))
    return os.stat(table).st_blocks * 512, slot_size, claimed, ready

# The collector reads the table every 50 ms: wait (20 s at most) until it
# has given back the pages of the slots that are gone.
deadline = time.monotonic() + 20
held, slot_size, claimed, ready = state()
while held > 4096 + (ready - int(sys.argv[1])) * slot_size and time.monotonic() < deadline:
    time.sleep(0.01)
    held, slot_size, claimed, ready = state()
print(held, slot_size, claimed, ready)
"""
    d = t.subdir("pages")
    driver = os.path.join(d, "driver.py")
    with open(driver, "w") as f:
        f.write(script)
    res = t.run(["/usr/bin/python3", driver, str(retired)], expect_rc=0)
    held, slot_size, claimed, ready = (int(x) for x in res.stdout.decode().split())
    check(claimed >= 300, f"{claimed} slots claimed for 300 children")
    limit = 4096 + (ready - retired) * slot_size
    check(held <= limit, f"the table holds {held} bytes with {ready} slots ready and "
                         f"{claimed} claimed: expected at most {limit}")
    ft.assert_count(res.trace.find(name="true"), 300, "/bin/true children", res.trace)


@test
def test_table_killed(t):
    """Images killed by SIGKILL in the table: argv and signal are known."""
    # Each sleep is killed once it sleeps: its image has said HELLO in the
    # table by then.
    asleep = 'read -r _ comm state _ < /proc/$!/stat && [ "$comm $state" = "(sleep) S" ]'
    cmd = ["sh", "-c", f"for i in 1 2 3; do sleep 30 & until {asleep}; do sleep 0.01; done; "
           "kill -9 $!; done; wait; exit 0"]
    res, n = traced_connects(t, cmd)
    check(n == 0, f"{n} connections (expected none)")
    tr = res.trace
    sleeps = tr.find(argv=["sleep", "30"])
    ft.assert_count(sleeps, 3, "killed sleep children", tr)
    for p in sleeps:
        ft.assert_exit(p, signal=9, trace=tr)


@test
def test_table_handed_slots(t):
    """The slot of an image is claimed by the process that execs it (a fork
    child of sh) or spawns it (posix_spawn, posix_spawnp) and handed over:
    the image maps that one slot of the table, never the header, and the
    trace is as complete as ever."""
    import re
    spawn = ft.prog("spawn")
    cmd = ["sh", "-c", f"for i in $(seq 20); do /bin/true x; done; {spawn} >/dev/null; exit 0"]
    d = t.subdir("handed")
    log = os.path.join(d, "strace.log")
    argv, p = ft.strace_forktrace_run(cmd, d, log, "execve,mmap")
    res = ft.Result(argv, p.returncode, p.stdout, p.stderr, 0, d, None, p.pid)
    res.out_path = os.path.join(d, "trace.json")
    res.trace = ft.load_trace(res.out_path)
    ft.check_common(res, quiet=True)
    tr = res.trace
    check_loop(tr, 20, "handed slots")
    codes = sorted((p.exit or {}).get("code") for p in tr.all() if p.parent == tr.find(argv=[spawn])[0].tpid)
    check(codes == [4, 6], f"exit codes of spawn's children: {codes}")
    image = {}
    maps = {}
    page = re.compile(r"^(\d+)\s+mmap\(NULL, 4096, PROT_READ\|PROT_WRITE, MAP_SHARED(?:\|MAP_POPULATE)?, \d+, (0x[0-9a-f]+|0)[) ]")
    with open(log) as f:
        for line in f:
            # strace pads short pids; an exec split by another process's
            # line ends in "resumed"; a failed one (a $PATH search) is
            # replaced by the next.
            m = re.match(r'^(\d+)\s+execve\("([^"]*)", \[([^\]]*)\]', line)
            if m:
                image[m.group(1)] = (m.group(2), m.group(3))
                maps[m.group(1)] = []
                continue
            m = page.match(line)
            if m and m.group(1) in maps:
                maps[m.group(1)].append(int(m.group(2), 16))
    leaves = [pid for pid, (path, args) in image.items()
              if path == "/bin/true" or path.endswith("/exit_with") or '"exit 6"' in args]
    ft.assert_count(leaves, 22, "exec'd images of /bin/true, exit_with and sh -c 'exit 6'", tr)
    for pid in leaves:
        check(maps[pid] and 0 not in maps[pid] and len(maps[pid]) == 1,
              f"image {pid} ({image[pid][0]}) mapped table pages at {maps[pid]}: expected its "
              f"handed slot only, not the header (offset 0)")


if __name__ == "__main__":
    ft.main()
