"""Launch following in the agent (docs/MULTIHOST.md, "Launch following").

A fake `ssh` first in PATH records the argv it was given (and its pid and
its parent's), and in run mode behaves as ssh to localhost would: it runs
its arguments after the destination, joined with spaces, with `sh -c`.
The traced program is tests/e2e/remote_driver.py, started through `env`
with FORKTRACE_HEAD and FORKTRACE_REMOTE set, as a collector that takes
nodes sets them. FORKTRACE_REMOTE names no executable here, so the
rewritten command takes its fallback branch: it runs the original command
untraced, which must behave exactly as the command ssh was given.
"""

import json
import os
import stat
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ftcheck import *  # noqa: E402,F401,F403

HEAD = "auto:4567"
DRIVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "remote_driver.py")

FAKE_SSH = r"""#!/bin/sh
{ printf '%s\n' "$$" "$PPID"; printf '%s\0' "$@"; } > "$FAKE_SSH_LOG.${FAKE_SSH_CASE:-0}.$$"
[ -n "$FAKE_SSH_RUN" ] || exit 0
shift
exec /bin/sh -c "$*"
"""


def q(s):
    """s single-quoted for a POSIX shell, as the agent quotes it."""
    return "'" + s.replace("'", "'\\''") + "'"


def wrapper(forktrace, dest, pid, cmd):
    """The remote command the agent puts in place of cmd."""
    sh = '"${SHELL:-/bin/sh}"'
    return (f"if [ -x {q(forktrace)} ]; then exec {q(forktrace)} run --join {q(HEAD)} "
            f"--launcher-pid {pid} --launched-as {q(dest)} -q -- {sh} -c {q(cmd)}; "
            f"else exec {sh} -c {q(cmd)}; fi")


def fake_ssh_dir(ctx, names=("ssh",)):
    d = ctx.subdir("bin")
    for name in names:
        path = os.path.join(d, name)
        with open(path, "w") as f:
            f.write(FAKE_SSH)
        os.chmod(path, stat.S_IRWXU | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)
    return d


def remote_env(ctx, bindir, run=False, rsh=None):
    env = dict(os.environ)
    env["PATH"] = bindir + ":" + env.get("PATH", "/usr/bin:/bin")
    env["SHELL"] = "/bin/sh"
    env["FAKE_SSH_LOG"] = ctx.path("ssh-argv")
    if run:
        env["FAKE_SSH_RUN"] = "1"
    else:
        env.pop("FAKE_SSH_RUN", None)
    return env


def remote_cmd(ctx, cases, forktrace, rsh=None, name="cases.json"):
    """The traced command: the driver behind `env` setting the variables
    of launch following."""
    path = ctx.path(name)
    with open(path, "w") as f:
        json.dump(cases, f)
    cmd = ["env", "FORKTRACE_HEAD=" + HEAD, "FORKTRACE_REMOTE=" + forktrace]
    if rsh:
        cmd.append("FORKTRACE_RSH=" + rsh)
    return cmd + ["/usr/bin/python3", DRIVER, path]


def ssh_logs(ctx):
    """{pid: (case, ppid, argv)} of every fake ssh run so far (case: the
    driver's index of the command line); the logs removed."""
    out = {}
    d = os.path.dirname(ctx.path("ssh-argv"))
    for name in os.listdir(d):
        if not name.startswith("ssh-argv."):
            continue
        with open(os.path.join(d, name), "rb") as f:
            data = f.read()
        os.unlink(os.path.join(d, name))
        pid, ppid, rest = data.split(b"\n", 2)
        argv = [a.decode() for a in rest.split(b"\0")[:-1]]
        out[int(pid)] = (int(name.split(".")[1]), int(ppid), argv)
    return out


def remote_marks(trace):
    """{host pid: [mark args]} of the "remote launch" marks in the trace."""
    out = {}
    for p in trace.all():
        for mk in p.marks(cat="remote", name="remote launch"):
            out.setdefault(p.rec.get("pid"), []).append(mk.get("args") or {})
    return out


# (method, argv, where the command starts or None: left alone, destination)
REWRITE_CASES = [
    ("subprocess", ["ssh", "node2", "echo", "hi"], 2, "node2"),
    ("subprocess", ["ssh", "-p", "2222", "-l", "user", "node2", "ls", "-l", "/"], 6, "node2"),
    ("subprocess", ["ssh", "-p2222", "-oBatchMode=yes", "user@node2", "echo a b"], 4,
     "user@node2"),
    ("subprocess", ["ssh", "-tt", "-vx", "-i", "key", "-J", "jump", "node2", "uname"], 8, "node2"),
    ("subprocess", ["ssh", "-o", "BatchMode=yes", "--", "node2", "echo", "x"], 5, "node2"),
    ("subprocess", ["ssh", "node2", "-l", "user", "--", "echo", "it's", "a  b"], 5, "node2"),
    ("subprocess", ["ssh", "-f", "-t", "node2", "printf '%s\\n' \"$HOME\""], 4, "node2"),
    # As pdsh -R ssh, GNU parallel --sshlogin and Open MPI 4.1's mpirun
    # call it (tests/cluster/README.md, "What the launchers give ssh").
    ("subprocess", ["ssh", "-oConnectTimeout=10", "-2", "-a", "-x", "node1", "hostname"], 6,
     "node1"),
    ("subprocess", ["ssh", "node1", "--", "exec", "perl", "-X", "-e",
                    "GNU_Parallel_worker,eval+pack+q/H10000000/,join+q//,@ARGV", "0A1B"], 3,
     "node1"),
    ("subprocess", ["ssh", "-x", "node1", " orted", "-mca", "ess", '"env"', "-mca",
                    "orte_hnp_uri", '"3143761920.0;tcp://10.77.0.1:37035"', "--tree-spawn"], 3,
     "node1"),
    ("subprocess", ["ssh", "-t", "node2"], None, None),
    ("subprocess", ["ssh", "node2"], None, None),
    ("subprocess", ["ssh", "-N", "-L", "8080:localhost:80", "node2"], None, None),
    ("subprocess", ["ssh", "-fN", "node2", "true"], None, None),
    ("subprocess", ["ssh", "-s", "node2", "sftp"], None, None),
    ("subprocess", ["ssh", "-G", "node2", "true"], None, None),
    ("subprocess", ["ssh", "-W", "node3:22", "node2"], None, None),
    ("subprocess", ["ssh", "node2", ""], None, None),
    ("subprocess", ["ssh", "-p"], None, None),
    ("execvp", ["ssh", "-l", "me", "node4", "make", "-j2"], 4, "node4"),
    ("spawnp", ["ssh", "node5", "hostname"], 2, "node5"),
    ("subprocess", ["rsh", "-l", "user", "node6", "date"], 4, "node6"),
    ("subprocess", ["oarsh", "node7", "true"], 2, "node7"),
    ("subprocess", ["notssh", "node8", "true"], None, None),
]


@test
def remote_rewrite(ctx):
    """The exact argv ssh is given for each command line: the remote
    command rewritten as one argument, every word before it kept, and the
    command lines without a remote command (interactive, -N, -s, -G, -W,
    an empty command, a bad option) left alone; by vfork (subprocess),
    execvp after a failed attempt, and posix_spawnp; a REMOTE mark on the
    process that ran each launch, and none else."""
    bindir = fake_ssh_dir(ctx, ("ssh", "rsh", "oarsh", "notssh"))
    missing = ctx.path("no-forktrace-here", "forktrace")
    cases = [[m, argv] for m, argv, _, _ in REWRITE_CASES]
    res = ctx.run(remote_cmd(ctx, cases, missing, rsh="qrsh:oarsh"), env=remote_env(ctx, bindir),
                  expect_rc=0)
    logs = ssh_logs(ctx)
    check(len(logs) == len(REWRITE_CASES),
          f"{len(logs)} fake ssh runs, {len(REWRITE_CASES)} expected: {logs}")
    by_case = {case: (pid, ppid, argv) for pid, (case, ppid, argv) in logs.items()}
    marks = remote_marks(res.trace)
    launches = 0
    for i, (method, argv, cmd_at, dest) in enumerate(REWRITE_CASES):
        check(i in by_case, f"case {i} {argv} did not run ssh: {logs}")
        pid, ppid, got = by_case[i]
        if cmd_at is None:
            check(got == argv[1:], f"{argv} was rewritten: {got}")
            check(pid not in marks, f"{argv}: a remote mark without a launch: {marks.get(pid)}")
            continue
        launches += 1
        launcher = ppid if method == "spawnp" else pid
        want = argv[1:cmd_at] + [wrapper(missing, dest, launcher, " ".join(argv[cmd_at:]))]
        check(got == want, f"{method} {argv}:\n  got  {got}\n  want {want}")
        check(marks.get(pid) == [{"host": dest}],
              f"{method} {argv}: marks on pid {pid}: {marks.get(pid)} (all: {marks})")
    check(sum(len(v) for v in marks.values()) == launches,
          f"{launches} launches, marks {marks}")


RUN_CASES = [
    ("subprocess", ["ssh", "node2", "echo", "hi"]),
    ("subprocess", ["ssh", "node2", "echo \"a  b\"; printf '%s|' x 'y z' \"it's\"; echo; exit 3"]),
    ("subprocess", ["ssh", "node2", "echo", "it's", "unbalanced"]),
    ("subprocess", ["ssh", "node2", "printf", "'%s\\n'", "$((6*7))", "'\\\\'", "'\"'"]),
    ("execvp", ["ssh", "node2", "for i in 1 2; do echo $i; done; exit 5"]),
    ("spawnp", ["ssh", "node2", "cat /nonexistent-ft 2>&1; exit 1"]),
]


@test
def remote_fallback_same(ctx):
    """Where forktrace is missing on the far side, the rewritten command
    runs the original one with the login shell: the same output, errors
    and exit codes as the command ssh was given, whatever its quotes,
    single quotes, expansions and syntax errors."""
    bindir = fake_ssh_dir(ctx)
    missing = ctx.path("no-forktrace-here", "forktrace")
    env = remote_env(ctx, bindir, run=True)
    res = ctx.run_compare(remote_cmd(ctx, [[m, a] for m, a in RUN_CASES], missing), env=env)
    check(res.rc == 0 + 3 + 2 + 0 + 5 + 1, f"exit codes: {res.rc}")
    logs = ssh_logs(ctx)
    rewritten = [argv for _, (_, _, argv) in logs.items() if argv[-1].startswith("if [ -x ")]
    check(len(rewritten) == len(RUN_CASES),
          f"{len(rewritten)} of {len(logs)} runs (untraced and traced) rewritten, "
          f"{len(RUN_CASES)} expected")


@test
def remote_long_command(ctx):
    """A remote command too long to rewrite (the new argument would pass
    the kernel's limit for one argument) is left as it was: ssh runs it
    untraced there, and the mark says so."""
    bindir = fake_ssh_dir(ctx)
    missing = ctx.path("no-forktrace-here", "forktrace")
    long_cmd = "echo " + "x" * 70000
    res = ctx.run(remote_cmd(ctx, [["subprocess", ["ssh", "node2", long_cmd]]], missing),
                  env=remote_env(ctx, bindir), expect_rc=0)
    logs = ssh_logs(ctx)
    check(len(logs) == 1, f"fake ssh runs: {len(logs)}")
    pid, (_, _, got) = next(iter(logs.items()))
    check(got == ["node2", long_cmd], f"the long command was changed: {[a[:80] for a in got]}")
    marks = remote_marks(res.trace)
    check(marks.get(pid) == [{"host": "node2", "untraced": True}], f"marks: {marks}")


@test
def remote_not_armed(ctx):
    """Without FORKTRACE_HEAD (a run with --no-remote) nothing is
    rewritten, and the agent's variables of launch following are hidden
    from the program."""
    bindir = fake_ssh_dir(ctx)
    path = ctx.path("cases.json")
    with open(path, "w") as f:
        json.dump([["subprocess", ["ssh", "node2", "echo", "hi"]]], f)
    env = remote_env(ctx, bindir)
    ctx.run(["env", "FORKTRACE_REMOTE=/x", "/usr/bin/python3", DRIVER, path], env=env,
            expect_rc=0, opts=["--no-remote"])
    logs = ssh_logs(ctx)
    check([a for _, (_, _, a) in logs.items()] == [["node2", "echo", "hi"]], f"{logs}")
    out = ctx.run(["env", "FORKTRACE_HEAD=" + HEAD, "FORKTRACE_REMOTE=/x", "FORKTRACE_RSH=r",
                   "/usr/bin/python3", "-c",
                   "import os; print(sorted(k for k in os.environ if k.startswith('FORKTRACE') "
                   "and k != 'FORKTRACE_KEY_DIR'))"],
                  env=env, expect_rc=0, out="env.json")
    check(out.stdout.strip() == b"[]", f"the program sees {out.stdout!r}")


@test
def rank_in_hello(ctx):
    """The launcher's rank, read by each image's agent from its
    environment, reaches the trace's process records, with the variable
    it came from, by precedence (OMPI_COMM_WORLD_RANK before SLURM_PROCID
    and RANK); a process without one has none."""
    env = dict(os.environ)
    for k in ("OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID", "RANK",
              "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID", "LOCAL_RANK"):
        env.pop(k, None)
    res = ctx.run(["env", "SLURM_PROCID=0", "RANK=9", "OMPI_COMM_WORLD_RANK=3",
                   "OMPI_COMM_WORLD_LOCAL_RANK=1", "/usr/bin/python3", "-c",
                   "import subprocess; subprocess.run(['/bin/true']); "
                   "subprocess.run(['/bin/true'], env={'RANK': 'x'})"],
                  env=env, expect_rc=0)
    t = res.trace
    root = t.root()
    check(root.rec.get("rank") == 3 and root.rec.get("rank_var") == "OMPI_COMM_WORLD_RANK" and
          root.rec.get("local_rank") == 1, f"python3: {root.rec}")
    trues = t.find(name="true")
    check(len(trues) == 2, f"{trues}")
    ranked = [p for p in trues if p.rec.get("rank") == 3]
    plain = [p for p in trues if "rank" not in p.rec and "local_rank" not in p.rec]
    check(len(ranked) == 1 and len(plain) == 1, f"true processes: {[p.rec for p in trues]}")


if __name__ == "__main__":
    main()
