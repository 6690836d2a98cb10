#!/usr/bin/python3
"""Adversarial end-to-end tests of recovery: what agents write when they
cannot reach forktrace (spill files), while it runs and after it was
SIGKILLed; who owns the spill directories; what a crashed run leaves
behind.

The program is tests/progs/spill_tree.c; it writes the pids of every
process it made, and each test counts them in the trace.
"""

import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ftcheck as ft  # noqa: E402
from ftcheck import check, fail, prog, test, wait_until  # noqa: E402


def start_limited(ctx, args, nofile, env=None):
    """ctx.start(args) with RLIMIT_NOFILE set to nofile (soft, hard)."""
    argv = [ft.forktrace_bin()] + list(args)
    forks0 = ft.system_forks()
    t0 = time.monotonic()
    p = subprocess.Popen(argv, cwd=ctx.dir, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=env, start_new_session=True,
                         preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, nofile))
    return p, argv, ctx.dir, (t0, forks0)


def no_table_env():
    """Every image connects (FORKTRACE_TABLE_SLOTS=0): one fd each."""
    env = dict(os.environ)
    env["FORKTRACE_TABLE_SLOTS"] = "0"
    return env


def check_no_spill_dir(ctx):
    spill = ctx.path("trace.json.spill")
    if os.path.exists(spill):
        fail(f"the spill directory is left: {os.listdir(spill)[:5]}")


def check_held(ctx, res, n):
    """Every child of `spill_tree hold n` is in the trace, whole."""
    with open(ctx.path("pids")) as f:
        pids = [int(x) for x in f.read().split()]
    check(len(pids) == n, f"the program wrote {len(pids)} pids, expected {n}")
    tr = res.trace
    root = tr.root()
    for pid in pids:
        ps = tr.by_host_pid.get(pid, [])
        check(len(ps) == 1, f"child {pid} is {len(ps)} times in the trace\n  {res.describe()}")
        p = ps[0]
        ft.assert_parent(p, root, tr)
        ft.assert_instrumented(p, True, tr)
        ft.assert_exit(p, code=0, trace=tr)
        check(p.argv == ["spill_tree", "child-hold", p.argv[2], p.argv[3]],
              f"child {pid}: its HELLO is missing (argv {p.argv})")


@test
def nofile_raised(ctx):
    """1100 instrumented processes alive at once, each connected, under
    the usual soft limit of 1024 fds (hard 4096): forktrace must not run
    out of fds (the images past ~1000 would spill, and a run that did not
    read their files would say 0 lost). The program itself still
    gets the soft limit it would have had untraced."""
    n = 1100
    res = ctx.finish(start_limited(ctx, ctx.run_args([prog("spill_tree"), "hold", str(n),
                                                      ctx.path("pids")]),
                                   (1024, 4096), env=no_table_env()), timeout=50)
    ctx.load(res, expect_rc=0)
    check(res.out.splitlines()[0] == "nofile 1024",
          f"the program saw another RLIMIT_NOFILE soft limit: {res.out[:100]!r}")
    check("spill file" not in res.err,
          f"images had to spill: forktrace ran out of fds\n  {res.describe()}")
    check_held(ctx, res, n)
    check_no_spill_dir(ctx)


@test
def spill_merged_at_end(ctx):
    """Images that cannot reach forktrace while it runs (here: a mount
    namespace hides its socket directory from them) spill to
    OUTPUT.spill/: the run merges those files into its trace (every
    process whole, 0 lost), says so, and removes them. A run that did not
    read them would say "0 lost" with their processes missing."""
    if os.geteuid() != 0 or not shutil.which("unshare"):
        raise ft.Skip("needs root and unshare(1) for a mount namespace")
    # Short: forktrace puts its socket directory in $TMPDIR only when
    # the path fits a socket address.
    sock = tempfile.mkdtemp(prefix="ft-hide-", dir="/tmp")
    try:
        spill_merged_in(ctx, sock)
    finally:
        shutil.rmtree(sock, ignore_errors=True)


def spill_merged_in(ctx, sock):
    env = dict(os.environ, TMPDIR=sock)
    n = 6
    hidden = (f"mount -t tmpfs none {sock} || exit 99; "
              f"for i in $(seq {n}); do {prog('spill_tree')} child-short; done; exit 0")
    res = ctx.run(["unshare", "-m", "--propagation", "private", "/bin/sh", "-c", hidden],
                  env=env, expect_rc=0)
    check("merged" in res.err and "spill file" in res.err,
          f"forktrace did not say it merged spill files: {res.err[-2000:]!r}")
    tr = res.trace
    shorts = tr.find(argv_has="child-short")
    check(len(shorts) == n, f"{len(shorts)} of the {n} hidden children in the trace\n{tr.dump()}")
    for p in shorts:
        ft.assert_exit(p, code=3, trace=tr)
        ft.assert_instrumented(p, True, tr)
    sh = tr.one(name="sh")
    for p in shorts:
        ft.assert_parent(p, sh, tr)
        # Their resource use came through the spill files too: the
        # children's EXIT and sh's WAIT records of them.
        ru = p.rec.get("rusage") or {}
        check(ru.get("source") == "wait" and ru.get("maxrss_kb", 0) > 0,
              f"rusage of a spilled child: {ru}\n{p.describe()}")
    check_no_spill_dir(ctx)


@test
def spill_unmerged_counted(ctx):
    """A spill file the run cannot merge (damaged) is counted and named:
    the summary never says "0 lost" then, and the file stays."""
    spill = ctx.path("trace.json.spill")
    bad = os.path.join(spill, "1-2-3.ftspill")
    # The program plants the file while the run goes on: an agent that
    # died writing its first frame.
    script = (f"mkdir -p -m 700 {spill} && printf 'XXXXXXXXXXXX' > {bad} && "
              f"{prog('spill_tree')} child-short; exit 0")
    res = ctx.forktrace(ctx.run_args(["/bin/sh", "-c", script]))
    check(res.rc == 0, f"forktrace exited {res.rc}\n  {res.describe()}")
    check(not res.summary_lines(), f"the summary says 0 lost: {res.err!r}")
    check("1 spill file not merged" in res.err and spill in res.err,
          f"the summary does not count and name what was not merged: {res.err!r}")
    check(bad in res.err, f"the damaged file is not named: {res.err!r}")
    check(os.path.exists(bad), "the file that was not merged was removed")
    tr = ft.load_trace(ctx.path("trace.json"))
    check(len(tr.find(name="spill_tree")) == 1, f"the trace lost the child:\n{tr.dump()}")


def read_pids(path):
    with open(path) as f:
        return [(int(a), b) for a, b in (line.split() for line in f)]


@test
def collector_killed_recovery(ctx):
    """forktrace is SIGKILLed while a program forks short and long
    children: the program goes on, and `forktrace combine OUTPUT.spill`
    gives back every process it made afterwards, every one still running
    then, and itself, with their exit codes; none twice. Images that went
    on writing into the process table nobody reads any more would leave
    no spill file at all."""
    nbefore, nlong, nafter = 200, 6, 40
    started = ctx.start(ctx.run_args([prog("spill_tree"), "crash", str(nbefore), str(nlong),
                                      str(nafter), ctx.dir]))
    wait_until(lambda: os.path.exists(ctx.path("ready")), "the program's first phase")
    os.kill(started[0].pid, signal.SIGKILL)
    started[0].wait()
    open(ctx.path("go"), "w").close()
    wait_until(lambda: os.path.exists(ctx.path("pids")), "the program's end")
    pids = read_pids(ctx.path("pids"))
    root_pid = pids[0][0]

    def gone():
        try:
            os.kill(root_pid, 0)
            return False
        except ProcessLookupError:
            return True
    wait_until(gone, "the program to exit")
    spill = ctx.path("trace.json.spill")
    check(os.path.isdir(spill), "no spill directory after forktrace was killed")
    res = ctx.forktrace(["combine", spill, "-o", "recovered.json"])
    check(res.rc == 0, f"combine of the spill directory failed\n  {res.describe()}")
    tr = ft.load_trace(ctx.path("recovered.json"))
    dups = {pid: ps for pid, ps in tr.by_host_pid.items() if len(ps) > 1}
    check(not dups, f"processes recovered twice: {dups}\n{tr.dump()}")
    want = pids
    missing = [(pid, phase) for pid, phase in want if pid not in tr.by_host_pid]
    check(not missing, f"{len(missing)} of {len(want)} processes not recovered: "
          f"{missing[:10]}\n{tr.dump()}")
    codes = {"root": 0, "long": 0}
    for i, (pid, phase) in enumerate(p for p in pids if p[1] == "before"):
        codes[pid] = 3 if i % 2 == 0 else 4
    for i, (pid, phase) in enumerate(p for p in pids if p[1] == "after"):
        codes[pid] = 3 if i % 2 == 0 else 4
    for pid, phase in want:
        p = tr.by_host_pid[pid][0]
        ft.assert_exit(p, code=codes.get(pid, codes.get(phase)), trace=tr)
    root = tr.by_host_pid[root_pid][0]
    for pid, phase in want[1:]:
        ft.assert_parent(tr.by_host_pid[pid][0], root, tr)


def kill_run_midway(ctx, env, nbefore=30, nlong=4, nafter=20):
    """`forktrace run -- spill_tree crash ...` in ctx.dir with env;
    forktrace is SIGKILLed between the program's phases, and the program
    runs to its end. Returns the program's list of (pid, phase)."""
    started = ctx.start(ctx.run_args([prog("spill_tree"), "crash", str(nbefore), str(nlong),
                                      str(nafter), ctx.dir]), env=env)
    wait_until(lambda: os.path.exists(ctx.path("ready")), "the program's first phase")
    os.kill(started[0].pid, signal.SIGKILL)
    started[0].wait()
    open(ctx.path("go"), "w").close()
    wait_until(lambda: os.path.exists(ctx.path("pids")), "the program's end")
    pids = read_pids(ctx.path("pids"))

    def gone():
        try:
            os.kill(pids[0][0], 0)
            return False
        except ProcessLookupError:
            return True
    wait_until(gone, "the program to exit")
    return pids


def agent_path():
    return os.path.join(os.path.dirname(ft.forktrace_bin()), "libforktrace-agent.so")


def need_root():
    if os.geteuid() != 0:
        raise ft.Skip("needs root (files of another user)")


def untraced_agent(argv, env_extra):
    """argv with the agent preloaded and no forktrace: it spills."""
    env = dict(os.environ, LD_PRELOAD=agent_path(), **env_extra)
    env.pop("FORKTRACE_SOCK", None)
    env.pop("FORKTRACE_SPILL", None)
    env.update(env_extra)
    return subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, capture_output=True,
                          timeout=20)


@test
def spill_dir_symlink_refused(ctx):
    """OUTPUT.spill is a symbolic link to a directory someone else chose:
    forktrace run refuses before COMMAND starts (else the agents would
    spill there, and the run would merge what it held)."""
    target = ctx.subdir("elsewhere")
    os.symlink(target, ctx.path("trace.json.spill"))
    marker = ctx.path("ran")
    res = ctx.forktrace(ctx.run_args(["/bin/sh", "-c", f"touch {marker}"]))
    check(res.rc == 1, f"forktrace exited {res.rc}, expected 1\n  {res.describe()}")
    check(not os.path.exists(marker), "COMMAND ran")
    check("trace.json.spill" in res.err and "not a directory" in res.err,
          f"the message does not say what is wrong: {res.err!r}")
    check(os.listdir(target) == [], f"something was written there: {os.listdir(target)}")


@test
def spill_dir_leftover_refused(ctx):
    """OUTPUT.spill still holds the spill files of a run whose forktrace
    died: a new run refuses to start (it would have merged them as its
    own, then deleted them) and says how to recover them."""
    spill = ctx.subdir("trace.json.spill")
    os.chmod(spill, 0o700)
    r = untraced_agent([prog("spill_tree"), "child-short"], {"FORKTRACE_SPILL": spill})
    check(r.returncode == 3, f"the program exited {r.returncode}: {r.stderr!r}")
    before = sorted(os.listdir(spill))
    check(len(before) == 1, f"spill files: {before}")
    res = ctx.forktrace(ctx.run_args(["/bin/true"]))
    check(res.rc == 1, f"forktrace exited {res.rc}, expected 1\n  {res.describe()}")
    check("forktrace combine" in res.err and spill in res.err,
          f"the message does not say how to recover: {res.err!r}")
    check(sorted(os.listdir(spill)) == before, "the earlier run's files changed")


@test
def spill_dir_foreign_default(ctx):
    """Without forktrace the agent spills to $TMPDIR/forktrace-spill-UID.
    Another user made it first (world-writable), or made it a symbolic
    link to a directory of theirs: the agent writes nothing there, and
    says so in one line (a trace written there, that user could read,
    delete or forge)."""
    need_root()
    tmp = ctx.subdir("tmp")
    d = os.path.join(tmp, f"forktrace-spill-{os.geteuid()}")
    os.mkdir(d)
    os.chmod(d, 0o777)
    os.chown(d, 65534, 65534)
    r = untraced_agent([prog("spill_tree"), "child-short"], {"TMPDIR": tmp})
    check(r.returncode == 3, f"the program exited {r.returncode}: {r.stderr!r}")
    check(os.listdir(d) == [], f"the agent wrote into another user's directory: {os.listdir(d)}")
    check(r.stderr.count(b"forktrace-agent: ") == 1 and b"not a private directory" in r.stderr,
          f"expected one line from the agent: {r.stderr!r}")
    os.rmdir(d)
    target = ctx.subdir("theirs")
    os.symlink(target, d)
    r = untraced_agent([prog("spill_tree"), "child-short"], {"TMPDIR": tmp})
    check(r.returncode == 3, f"the program exited {r.returncode}: {r.stderr!r}")
    check(os.listdir(target) == [], f"the agent followed the link: {os.listdir(target)}")
    check(b"symbolic link" in r.stderr, f"no word of the refusal: {r.stderr!r}")
    # Its own private directory is used.
    os.unlink(d)
    r = untraced_agent([prog("spill_tree"), "child-short"], {"TMPDIR": tmp})
    check(r.returncode == 3 and not r.stderr, f"rc {r.returncode}: {r.stderr!r}")
    check(len(os.listdir(d)) == 1, f"no spill file in the agent's own directory: {os.listdir(d)}")


@test
def combine_foreign_spill_warned(ctx):
    """A spill file that another user owns is read, but combine says so
    and exits 1: anyone who could write it could have forged it, and
    merged without a word it would pass for the run's own."""
    need_root()
    spill = ctx.subdir("spill")
    os.chmod(spill, 0o700)
    r = untraced_agent([prog("spill_tree"), "child-short"], {"FORKTRACE_SPILL": spill})
    check(r.returncode == 3, f"the program exited {r.returncode}: {r.stderr!r}")
    (name,) = os.listdir(spill)
    os.chown(os.path.join(spill, name), 65534, 65534)
    res = ctx.forktrace(["combine", spill, "-o", "out.json"])
    check(res.rc == 1, f"combine exited {res.rc}, expected 1\n  {res.describe()}")
    check(name in res.err and "owned by uid 65534" in res.err,
          f"combine did not name the file and its owner: {res.err!r}")
    tr = ft.load_trace(ctx.path("out.json"))
    check(len(tr.find(argv_has="child-short")) == 1, f"the file was not read:\n{tr.dump()}")


@test
def stale_cleaned(ctx):
    """A run whose forktrace was SIGKILLed left its socket directory in
    TMPDIR and its process table in /dev/shm (4 MiB and more of memory,
    for good). The next run removes them, never those of a run still
    going, and what the table held of the processes that were running
    goes to the killed run's spill directory first: combine still
    recovers every process."""
    tmp = tempfile.mkdtemp(prefix="ft-stale-", dir="/tmp")
    try:
        stale_cleaned_in(ctx, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def stale_cleaned_in(ctx, tmp):
    env = dict(os.environ, TMPDIR=tmp)
    pids = kill_run_midway(ctx, env)
    (stale,) = os.listdir(tmp)
    table = os.path.join(tmp, stale, "table")
    shm = os.path.dirname(os.path.realpath(table)) if os.path.islink(table) else None
    # The next run removes them as it starts...
    other = ctx.subdir("other")
    live = ctx.start(ctx.run_args([prog("spill_tree"), "crash", "0", "1", "0", other],
                                  out="live.json"), env=env)
    wait_until(lambda: os.path.exists(os.path.join(other, "ready")), "the live run")
    live_dirs = os.listdir(tmp)
    check(stale not in live_dirs and len(live_dirs) == 1,
          f"socket directories while the next run goes on: {live_dirs} (the stale one: {stale})")
    if shm:
        check(not os.path.exists(shm), f"{shm} is left")
    # ... and a run starting while it goes on leaves its directory alone.
    ctx.run(["/bin/true"], out="next.json", env=env, expect_rc=0, leftovers_ok=True)
    check(os.listdir(tmp) == live_dirs,
          f"TMPDIR after a run beside the live one: {os.listdir(tmp)}, expected {live_dirs}")
    open(os.path.join(other, "go"), "w").close()
    live_res = ctx.finish(live)
    check("left by forktrace runs that were killed" in live_res.err,
          f"the run did not say what it removed: {live_res.err!r}")
    ctx.load(live_res, out="live.json", expect_rc=0)
    check(len(live_res.trace.all()) == 2, f"the live run's trace:\n{live_res.trace.dump()}")
    check(os.listdir(tmp) == [], f"left in TMPDIR: {os.listdir(tmp)}")
    # The killed run's processes are all still recoverable.
    res = ctx.forktrace(["combine", ctx.path("trace.json.spill"), "-o", "recovered.json"])
    check(res.rc == 0, f"combine of the spill directory failed\n  {res.describe()}")
    tr = ft.load_trace(ctx.path("recovered.json"))
    missing = [p for p in pids if p[0] not in tr.by_host_pid]
    check(not missing, f"{len(missing)} of {len(pids)} processes not recovered: {missing[:10]}")


if __name__ == "__main__":
    ft.main()
