#!/usr/bin/env python3
"""Multi-host runs on one machine (docs/MULTIHOST.md): a head (`forktrace run
--listen`) and node collectors (`forktrace run --join`) as separate
processes talking TCP on 127.0.0.1, with the real link, key and model
stream. A node gets a host name of its own in a UTS namespace (unshare -u)
when the test runs as root; otherwise its processes are told apart by
their command lines. The simulated cluster (tests/cluster/) runs the same
code across namespaces with sshd."""
import glob
import re
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ftcheck as ft  # noqa: E402
from ftcheck import check, fail, test  # noqa: E402

JOIN_PREFIX = "forktrace: nodes join with: forktrace run --join "
# What the node's job does: output on both streams, a child, an exit code.
NODE_JOB = ("echo node-out-$0; echo node-err >&2; sh -c 'exit 0' & wait; "
            "sleep 0.05; exit 5")


def node_name():
    return "ftnode-" + secrets.token_hex(3)


def node_argv(args, host=None):
    """forktrace args, in a UTS namespace named host when we may make one."""
    argv = [ft.forktrace_bin()] + list(args)
    if host and os.geteuid() == 0 and shutil.which("unshare"):
        return ["unshare", "-u", "sh", "-c", 'hostname "$0" && exec "$@"', host] + argv
    return argv


def has_uts():
    return os.geteuid() == 0 and shutil.which("unshare") is not None


def read_line(fd, timeout=20):
    """One line from a raw pipe fd, byte by byte (the rest is left to
    communicate())."""
    import select
    buf = b""
    deadline = time.monotonic() + timeout
    while not buf.endswith(b"\n"):
        r, _, _ = select.select([fd], [], [], max(0, deadline - time.monotonic()))
        check(r, f"no line on stderr within {timeout} s (so far {buf!r})")
        b = os.read(fd, 1)
        if not b:
            break
        buf += b
    return buf.decode(errors="replace")


def start_head(t, flag, extra=(), env=None, rc=3):
    """A head listening on a free port of 127.0.0.1 whose command waits for
    flag and exits rc; returns (started, "127.0.0.1:PORT")."""
    cmd = ["sh", "-c", f"echo head-out; while [ ! -e {flag} ]; do sleep 0.02; done; exit {rc}"]
    started = t.start(["run", "--listen", "127.0.0.1:0", "-o", "head.json"] + list(extra) +
                      ["--"] + cmd, env=env)
    line = read_line(started[0].stderr.fileno())
    check(line.startswith(JOIN_PREFIX),
          f"the head's first line is not how nodes join: {line!r}")
    addr = line[len(JOIN_PREFIX):].split()[0]
    check(addr.startswith("127.0.0.1:") and int(addr.split(":")[1]) > 0,
          f"the join line names {addr!r}")
    check(f"FORKTRACE_JOIN={addr}" in line, f"no FORKTRACE_JOIN form in {line!r}")
    return started, addr


def run_node(t, args, marker, host=None, env=None, timeout=30):
    """Runs a node collector (args: its forktrace run options) on NODE_JOB;
    returns the CompletedProcess."""
    argv = node_argv(["run"] + list(args) + ["--", "sh", "-c", NODE_JOB, marker], host)
    return subprocess.run(argv, cwd=t.dir, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, timeout=timeout, env=env)


def check_job_untouched(p, marker, extra_err=b""):
    """The node's job behaved as untraced: its streams and exit code."""
    check(p.returncode == 5, f"node exited {p.returncode}, the job exits 5: {p.stderr!r}")
    check(p.stdout == f"node-out-{marker}\n".encode(),
          f"node stdout {p.stdout!r}, untraced it is node-out-{marker}")
    check(p.stderr == b"node-err\n" + extra_err,
          f"node stderr {p.stderr!r}, untraced it is b'node-err\\n' (+ {extra_err!r})")


def finish_head(t, started, flag, rc=3, timeout=45):
    open(flag, "w").close()
    res = t.finish(started, timeout=timeout)
    return t.load(res, out="head.json", expect_rc=rc, single_root=False)


def node_procs(tr, marker):
    """The node job's processes: its sh and what that sh started."""
    roots = [p for p in tr.all() if marker in (p.argv or [])]
    out = list(roots)
    for r in roots:
        out += tr.descendants(r)
    return out


def key_env(t, name):
    """The environment with the run keys in the test's own directory (the
    shared home of the hosts), not in ~/.forktrace/keys."""
    env = dict(os.environ)
    env["FORKTRACE_KEY_DIR"] = t.path(name)
    return env


@test
def test_mh_listen_join(t):
    """A node that joins with --join: its processes are in the head's trace,
    with its host name, on the head's clock (measured), and the node's job
    runs as untraced (streams, exit code); the head's summary counts two
    hosts."""
    flag, marker, host = t.path("flag"), "m" + secrets.token_hex(4), node_name()
    env = key_env(t, "keys")
    head, addr = start_head(t, flag, env=env)
    p = run_node(t, ["--join", addr, "-q"], marker, host=host, env=env)
    check_job_untouched(p, marker)
    res = finish_head(t, head, flag)
    tr = res.trace
    procs = node_procs(tr, marker)
    check(len(procs) >= 2, f"the node's sh and its child are not in the trace:\n{tr.dump()}")
    want_host = host if has_uts() else socket.gethostname()
    for q in procs:
        check(q.rec.get("host") == want_host, f"{q.describe()} has host {q.rec.get('host')!r}")
        ft.assert_exit(q, kind="code", trace=tr)
    ft.assert_exit(procs[0], code=5, trace=tr)
    hosts = tr.meta.get("hosts") or []
    check(len(hosts) == 2, f"otherData.forktrace.hosts has {len(hosts)} entries: {hosts}")
    node = [h for h in hosts if h.get("role") == "node"]
    check(len(node) == 1 and node[0].get("clock") == "measured",
          f"the node's clock is not measured: {hosts}")
    check(any(l.startswith("forktrace: 2 hosts, ") for l in res.err.splitlines()),
          f"the summary does not count 2 hosts:\n{res.err}")
    check(res.stdout == b"head-out\n", f"head stdout {res.stdout!r}")
    check(not glob.glob(t.path("keys", "*.key")), "the run's key file was left behind")


@test
def test_mh_wrong_key(t):
    """A node whose key is not the run's (same run id, another secret) is
    refused with a warning naming its address; nothing of it is in the
    trace; the node writes its part to --node-output instead and its job
    runs as untraced."""
    flag, marker = t.path("flag"), "m" + secrets.token_hex(4)
    head, addr = start_head(t, flag, env=key_env(t, "keys"))
    keys = glob.glob(t.path("keys", "*.key"))
    check(len(keys) == 1, f"expected the head's one key file, found {keys}")
    other = t.path("otherkeys")
    os.makedirs(other, mode=0o700)
    wrong = os.path.join(other, os.path.basename(keys[0]))
    fd = os.open(wrong, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, (secrets.token_hex(32) + "\n").encode())
    os.close(fd)
    out = t.subdir("parts")
    p = run_node(t, ["--join", addr, "--node-output", out, "-q"], marker,
                 env=key_env(t, "otherkeys"))
    note = p.stderr.split(b"\n", 1)[1] if b"\n" in p.stderr else b""
    check_job_untouched(p, marker, extra_err=note)
    check(note.startswith(b"forktrace: node ") and note.count(b"\n") == 1 and
          out.encode() in note, f"the node does not say where its part went: {p.stderr!r}")
    res = finish_head(t, head, flag)
    check("refused a connection from 127.0.0.1:" in res.err,
          f"the head does not name the refused peer:\n{res.err}")
    check(not node_procs(res.trace, marker),
          f"the refused node's processes are in the trace:\n{res.trace.dump()}")
    check(len(glob.glob(os.path.join(out, "*.ftnode"))) == 1,
          f"no part file in {out}: {os.listdir(out)}")


@test
def test_mh_head_unreachable(t):
    """A node whose head does not answer writes its part to --node-output
    (one line on stderr says where) and its local copy (-o), its job runs
    as untraced, and
    `forktrace combine` of the head's trace and that file holds the node's
    processes."""
    marker = "m" + secrets.token_hex(4)
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now: connection refused
    out = t.subdir("parts")
    p = run_node(t, ["--join", f"127.0.0.1:{port}", "--node-output", out, "-q", "-o",
                     "local.json"], marker, env=key_env(t, "keys"))
    note = p.stderr.split(b"\n", 1)[1] if b"\n" in p.stderr else b""
    check_job_untouched(p, marker, extra_err=note)
    # -o with --join: a local copy of the node's own trace.
    local = ft.load_trace(t.path("local.json"))
    check(len(node_procs(local, marker)) >= 2, f"the node's local copy:\n{local.dump()}")
    parts = glob.glob(os.path.join(out, "*.ftnode"))
    check(len(parts) == 1 and parts[0].encode() in note,
          f"expected one part file named on stderr: {parts}, {p.stderr!r}")
    head = t.run(["sh", "-c", "echo head"], out="head.json", expect_rc=0,
                 env=key_env(t, "keys"))
    c = t.forktrace(["combine", "head.json", parts[0], "-o", "all.json"])
    check(c.rc == 0, f"combine failed: {c.describe()}")
    tr = ft.load_trace(t.path("all.json"))
    procs = node_procs(tr, marker)
    check(len(procs) >= 2, f"the node's processes are not in the combined trace:\n{tr.dump()}")
    check(len(tr.all()) == len(head.trace.all()) + len(procs),
          f"the combined trace has {len(tr.all())} processes:\n{tr.dump()}")


@test
def test_mh_node_killed(t):
    """A node collector killed with SIGKILL mid-run: the head does not hang,
    writes the trace with what the node sent, its open processes marked
    host lost, and exits with its command's code."""
    flag, marker, started = t.path("flag"), "m" + secrets.token_hex(4), t.path("started")
    env = key_env(t, "keys")
    head, addr = start_head(t, flag, env=env)
    job = f"touch {started}; sleep 30 & wait"
    node = subprocess.Popen([ft.forktrace_bin(), "run", "--join", addr, "-q", "--", "sh", "-c",
                             job, marker], cwd=t.dir, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                            start_new_session=True)
    ft.wait_until(lambda: os.path.exists(started), "the node's job to start")
    time.sleep(0.5)  # a few of its syncs (every 50 ms) and its clock burst
    node.kill()
    node.wait()
    os.killpg(node.pid, signal.SIGKILL)  # the job, orphaned
    t0 = time.monotonic()
    res = finish_head(t, head, flag, timeout=30)
    check(time.monotonic() - t0 < 15, "the head took more than 15 s after the node died")
    tr = res.trace
    procs = node_procs(tr, marker)
    check(procs, f"what the node sent before it died is not in the trace:\n{tr.dump()}")
    for q in procs:
        # touch ended before the node was killed, and keeps its exit.
        if q.name == "touch":
            ft.assert_exit(q, code=0, trace=tr)
        else:
            ft.assert_exit(q, kind="host_lost", trace=tr)
        check(q.rec.get("end_ns", -1) > 0, f"{q.describe()} has no end time")
    # The part was cut before the node could finish its tree: its
    # processes still have the parents the node knew (its sleep is its
    # sh's child), not only those of a finished part.
    sleeps = [q for q in tr.all() if q.argv == ["sleep", "30"]]
    check(len(sleeps) == 1, f"the node's sleep 30 is not in the trace once:\n{tr.dump()}")
    ft.assert_parent(sleeps[0], procs[0], trace=tr)
    hosts = [h for h in tr.meta.get("hosts") or [] if h.get("role") == "node"]
    check(len(hosts) == 1 and hosts[0].get("state") == "lost",
          f"the node's host is not marked lost: {hosts}")
    lost = [q for q in tr.all() if (q.rec.get("exit") or {}).get("kind") == "host_lost"]
    said = re.findall(r"; (\d+) of its processes, still open then, are marked host lost",
                      res.err)
    check(said == [str(len(lost))],
          f"the warning does not count the {len(lost)} processes marked host lost:\n{res.err}")


HERE = os.path.dirname(os.path.abspath(__file__))


class FakeSsh:
    """tests/e2e/fake_sshd.py's server, started outside the traced tree,
    and a directory with an `ssh` that talks to it (first in PATH of env)."""

    def __init__(self, t):
        d = t.subdir("fakebin")
        sock = t.path("sshd.sock")
        with open(os.path.join(d, "ssh"), "w") as f:
            f.write(f"#!/bin/sh\nexec {ft.PYTHON} {HERE}/fake_sshd.py ssh {sock} \"$@\"\n")
        os.chmod(os.path.join(d, "ssh"), 0o755)
        self.env = dict(key_env(t, "keys"), PATH=d + ":" + os.environ["PATH"])
        # The hosts have the same ssh, for nested hops.
        self.server = subprocess.Popen([ft.PYTHON, os.path.join(HERE, "fake_sshd.py"), "serve",
                                        sock], cwd=t.dir, env=self.env,
                                       stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
        t.expected_leftovers.add(self.server.pid)
        check(self.server.stdout.readline() == b"ready\n", "the fake sshd did not start")

    def close(self):
        self.server.kill()
        self.server.wait()


@test
def test_mh_fake_ssh(t):
    """A script that runs `ssh HOST CMD` (tests/e2e/fake_sshd.py: CMD runs
    outside the traced tree with a clean environment, as sshd would run
    it): the agent's rewrite starts a node collector in front of CMD,
    which joins the head by itself; CMD's processes are in the trace,
    under the ssh process, with the host's name; stdout, stderr and exit
    code are as untraced."""
    sshd = FakeSsh(t)
    host = node_name()
    marker = "m" + secrets.token_hex(4)
    script = (f"ssh {host} 'echo remote-out {marker}; echo remote-err >&2; "
              f"sh -c \"exit 0\"; exit 4'; echo after $?")
    try:
        res = t.run_compare(["sh", "-c", script], env=sshd.env, single_root=True)
    finally:
        sshd.close()
    tr = res.trace
    remote = [p for p in tr.all() if p.rec.get("host") not in (None, tr.meta.get("host"))]
    if has_uts():
        check(remote and all(p.rec.get("host") == host for p in remote),
              f"no process with host {host}:\n{tr.dump()}")
    shells = [p for p in tr.all() if any(marker in a for a in (p.argv or []))
              and p.rec.get("host") == (host if has_uts() else p.rec.get("host"))
              and p.name != "ssh"]
    check(shells, f"the remote command's shell is not in the trace:\n{tr.dump()}")
    # The fake ssh execs python3 with fake_sshd.py.
    ssh = [p for p in tr.all() if any("fake_sshd.py" in a for a in (p.argv or []))]
    check(len(ssh) == 1, f"no one ssh process in the trace:\n{tr.dump()}")
    check(any(ssh[0] in tr.ancestors(p) for p in shells),
          f"the remote command is not under the ssh that launched it:\n{tr.dump()}")


# One process that posix_spawns ssh once per host (argv[1:]: HOST or
# HOST:down, the latter an ssh that cannot reach its host), one after the
# other, and prints each exit code.
SPAWN_SSH = """
import os, sys
for arg in sys.argv[1:]:
    host, _, down = arg.partition(":")
    env = dict(os.environ, FAKE_SSH_DOWN="1" if down else "0")
    pid = os.posix_spawnp("ssh", ["ssh", host, "echo on-" + host], env)
    print(host, os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), flush=True)
"""


@test
def test_mh_spawn_several(t):
    """One process posix_spawns ssh to several hosts (every launch has its
    pid as the launcher): a, b whose ssh cannot reach it, c, and c again,
    unreachable. A node is matched to its launch by launcher pid and
    destination, and launches to one destination are counted: b and the
    second c are missing hosts although other launches of the same
    process joined, and each node's part is under its own ssh."""
    sshd = FakeSsh(t)
    a, b, c = node_name(), node_name(), node_name()
    try:
        res = t.run_compare([ft.PYTHON, "-c", SPAWN_SSH, a, b + ":down", c, c + ":down"],
                            env=sshd.env, single_root=False)
    finally:
        sshd.close()
    check(res.stdout.decode() == f"on-{a}\n{a} 0\n{b} 255\non-{c}\n{c} 0\n{c} 255\n",
          f"stdout {res.stdout!r}")
    missing = sorted(re.findall(r"^forktrace: host (\S+): part missing", res.err, re.M))
    check(missing == sorted([b, c]), f"the missing hosts are {missing}, not {b} and {c}:\n{res.err}")
    hosts = res.trace.meta.get("hosts") or []
    check(sorted(h.get("name") for h in hosts if h.get("state") == "missing") == sorted([b, c]),
          f"otherData.forktrace.hosts does not list {b} and {c} as missing: {hosts}")
    tr = res.trace
    sshs = [p for p in tr.all() if any("fake_sshd.py" in x for x in (p.argv or []))]
    check(len(sshs) == 4, f"not 4 ssh processes:\n{tr.dump()}")
    for host in (a, c):
        shells = [p for p in tr.all() if any(f"echo on-{host}" == x for x in (p.argv or []))]
        check(len(shells) == 1, f"no one remote shell of {host}:\n{tr.dump()}")
        ssh = [s for s in sshs if s in tr.ancestors(shells[0])]
        check(len(ssh) == 1 and host in ssh[0].argv and ssh[0].rec.get("exit", {}).get("code") == 0,
              f"{shells[0].describe()} is not under its own ssh:\n{tr.dump()}")


@test
def test_mh_write_options(t):
    """The head's write options apply to the nodes' parts as to its own
    processes: a program built with -finstrument-functions on the head
    and, through ssh, on a node (whose agents record every call: the
    node's command line has no --no-functions), traced with --no-functions,
    --filter and --exclude."""
    funcs = [ft.prog("ev_funcs"), "calls", "20"]
    host = node_name()
    sshd = FakeSsh(t)
    script = " ".join(funcs) + f" && ssh {host} '{' '.join(funcs)}'"
    cases = [(["--no-functions"], lambda names: not names),
             (["--filter", "^(c_leaf|lib_.*)$"], lambda names: names == {"c_leaf", "lib_add"}),
             (["--exclude", "poke|plugin"],
              lambda names: "c_leaf" in names and not any("poke" in x or "plugin" in x
                                                          for x in names))]
    try:
        for i, (opts, ok) in enumerate(cases):
            res = t.run(["sh", "-c", script], opts=opts, out=f"t{i}.json", env=sshd.env,
                        expect_rc=0)
            procs = [p for p in res.trace.all() if p.name == "ev_funcs"]
            check(len(procs) == 2 and len({p.rec.get("host") for p in procs}) ==
                  (2 if has_uts() else 1), f"not one ev_funcs per host:\n{res.trace.dump()}")
            for p in procs:
                names = {e["name"] for e in p.events
                         if e.get("ph") == "X" and e.get("cat") == "function"}
                check(ok(names), f"{opts}: {p.describe()} of host {p.rec.get('host')} "
                      f"has the function slices {sorted(names)[:20]}")
    finally:
        sshd.close()


@test
def test_mh_nested_hop(t):
    """ssh from a node to another node (a nested hop): the second node's
    collector joins the head directly (FORKTRACE_HEAD resolved on the
    first), its processes are in the trace with its host, and its part
    goes under the ssh on the first node, none under a head process. (On one machine no head process can have the
    launcher's pid; hosts whose pids collide are the cluster's.)"""
    if not has_uts():
        raise ft.Skip("telling hosts apart needs a UTS namespace (root, unshare)")
    sshd = FakeSsh(t)
    a, b, marker = node_name(), node_name(), "m" + secrets.token_hex(4)
    inner = f"echo on-b {marker}; exit 2"
    script = f"ssh {a} \"echo on-a; ssh {b} '{inner}'; echo back \\$?\"; echo after $?"
    try:
        res = t.run_compare(["sh", "-c", script], env=sshd.env, single_root=False)
    finally:
        sshd.close()
    check(res.stdout == b"on-a\non-b " + marker.encode() + b"\nback 2\nafter 0\n",
          f"stdout {res.stdout!r}")
    tr = res.trace
    on_b = [p for p in tr.all() if p.rec.get("host") == b]
    check(any(marker in " ".join(p.argv or []) for p in on_b),
          f"the second hop's command is not in the trace with host {b}:\n{tr.dump()}")
    for p in on_b:
        parent = tr.parent_of(p)
        if parent is None or parent.rec.get("host") not in (a, b):
            fail(f"{p.describe()} is under {parent and parent.describe()} of host "
                 f"{parent and parent.rec.get('host')}, not a process of {a} or {b}:\n"
                 f"{tr.dump()}")
    # b's part goes under its launcher on a: the process there that ran
    # ssh (the fake ssh execs fake_sshd.py), with the arrow of a remote
    # launch from it, and b's host names it.
    roots = [p for p in on_b if tr.parent_of(p).rec.get("host") == a]
    check(len(roots) == 1, f"b's part does not have one root under a process of {a}:\n"
          f"{tr.dump()}")
    launcher = tr.parent_of(roots[0])
    check(any("fake_sshd.py" in arg for arg in launcher.argv or []),
          f"b's root is under {launcher.describe()}, not the ssh on {a}:\n{tr.dump()}")
    ft.assert_parent(roots[0], launcher, trace=tr)
    ft.assert_flow(tr, launcher, roots[0], "remote")
    hosts = {h.get("name"): h for h in tr.meta.get("hosts") or []}
    check(hosts.get(b, {}).get("launcher") == launcher.tpid,
          f"host {b} does not name its launcher {launcher.tpid}: {hosts.get(b)}")


@test
def test_mh_forktrace_missing(t):
    """A host without forktrace at the remote path: the remote command runs
    untraced as it would without forktrace, and the summary names the host
    as missing."""
    sshd = FakeSsh(t)
    host = node_name()
    script = f"ssh {host} 'echo remote-out; exit 4'; echo after $?"
    try:
        res = t.run_compare(["sh", "-c", script], env=sshd.env,
                            opts=["--remote-forktrace", "/nonexistent/bin/forktrace"])
    finally:
        sshd.close()
    lines = [l for l in res.err.splitlines() if l.startswith(f"forktrace: host {host}: part missing")]
    check(len(lines) == 1 and "/nonexistent/bin/forktrace" in lines[0],
          f"the summary does not name {host} as missing:\n{res.err}")
    hosts = res.trace.meta.get("hosts") or []
    check(any(h.get("name") == host and h.get("state") == "missing" for h in hosts),
          f"otherData.forktrace.hosts does not list {host} as missing: {hosts}")


@test
def test_mh_node_session_dies(t):
    """A node collector whose ssh session dies (a SIGHUP to its process
    group, its stdout and stderr closed) goes on until its tree ends and
    still delivers the whole part: the job (which ignores SIGHUP) runs to
    its end and everything it started is in the head's trace."""
    flag, marker = t.path("flag"), "m" + secrets.token_hex(4)
    started, go = t.path("started"), t.path("go")
    env = key_env(t, "keys")
    head, addr = start_head(t, flag, env=env)
    job = (f"trap '' HUP PIPE; touch {started}; while [ ! -e {go} ]; do sleep 0.02; done; "
           f"echo late; echo late >&2; sh -c 'exit 0'; exit 6")
    node = subprocess.Popen([ft.forktrace_bin(), "run", "--join", addr, "--", "sh", "-c", job,
                             marker], cwd=t.dir, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                            start_new_session=True)
    ft.wait_until(lambda: os.path.exists(started), "the node's job to start")
    node.stdout.close()
    node.stderr.close()
    os.killpg(node.pid, signal.SIGHUP)
    time.sleep(0.2)
    open(go, "w").close()
    check(node.wait(timeout=20) == 6, f"the node exited {node.returncode}, its job exits 6")
    res = finish_head(t, head, flag)
    tr = res.trace
    procs = node_procs(tr, marker)
    ft.assert_exit(procs[0], code=6, trace=tr)
    check(any(p.argv == ["sh", "-c", "exit 0"] for p in procs),
          f"what the job started after the hangup is not in the trace:\n{tr.dump()}")
    hosts = [h for h in tr.meta.get("hosts") or [] if h.get("role") == "node"]
    check(len(hosts) == 1 and hosts[0].get("state") == "complete",
          f"the node's part is not complete: {hosts}")


@test
def test_mh_wait_cut(t):
    """A node still sending when the head's --wait-timeout ends its wait
    (its job runs on, no END came): its part is "incomplete", not
    "complete" nor "lost", with the time the head stopped waiting, and its
    open processes are running; the head says so on stderr."""
    flag, marker, started = t.path("flag"), "m" + secrets.token_hex(4), t.path("started")
    env = key_env(t, "keys")
    head, addr = start_head(t, flag, extra=["--wait-timeout", "1"], env=env)
    job = f"touch {started}; sleep 30 & wait"
    node = subprocess.Popen([ft.forktrace_bin(), "run", "--join", addr, "-q", "--", "sh", "-c",
                             job, marker], cwd=t.dir, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
                            start_new_session=True)
    t.expected_leftovers.add(node.pid)
    try:
        ft.wait_until(lambda: os.path.exists(started), "the node's job to start")
        time.sleep(0.5)  # its first syncs
        t0 = time.monotonic()
        open(flag, "w").close()
        res = t.finish(head, timeout=30)
        elapsed = time.monotonic() - t0
    finally:
        os.killpg(node.pid, signal.SIGKILL)
        node.wait()
    check(elapsed < 10, f"the head took {elapsed:.1f} s with --wait-timeout 1")
    res = t.load(res, out="head.json", expect_rc=3, single_root=False, allow_running=True,
                 leftovers_ok=True)
    tr = res.trace
    procs = node_procs(tr, marker)
    check(procs, f"what the node sent is not in the trace:\n{tr.dump()}")
    running = [q for q in procs if q.name in ("sh", "sleep")]
    check(len(running) == 2, f"not the node's sh and sleep:\n{tr.dump()}")
    for q in running:
        ft.assert_exit(q, kind="running", trace=tr)
    hosts = [h for h in tr.meta.get("hosts") or [] if h.get("role") == "node"]
    check(len(hosts) == 1 and hosts[0].get("state") == "incomplete" and
          hosts[0].get("lost_ns", -1) > 0, f"the node's part is not incomplete: {hosts}")
    check(max(q.rec.get("start_ns", 0) for q in procs) < hosts[0]["lost_ns"],
          f"the node's processes start after the head stopped waiting: {hosts}")
    check("still sending when the head stopped waiting for it" in res.err,
          f"the head does not say it stopped waiting for the node:\n{res.err}")
    info = t.forktrace(["info", "head.json"])
    check("incomplete: the head stopped waiting for it at" in info.out,
          f"forktrace info does not say the part is incomplete:\n{info.out}")


@test
def test_mh_options(t):
    """The multi-host options are checked before anything runs."""
    bad = [
        (["--listen", "x"], "--listen takes"),
        (["--listen", "70000"], "--listen takes"),
        (["--join", "7000"], "--join takes"),
        (["--join", "h:0"], "--join takes"),
        (["--join", "::1:7000"], "--join takes"),
        (["--join", "h:1", "--listen", "2"], "--join makes this run a node"),
        (["--listen", "2", "--no-remote"], "contradict"),
        (["--launcher-pid", "12"], "for a node collector"),
        (["--node-output", "d"], "--node-output is where a node collector"),
        (["--remote-forktrace", "rel/path"], "--remote-forktrace takes"),
        (["--remote-forktrace", "/a b"], "--remote-forktrace takes"),
    ]
    for opts, what in bad:
        r = t.forktrace(["run"] + opts + ["--", "true"])
        check(r.rc == 2 and what in r.err, f"forktrace run {opts}: rc {r.rc}, {r.err!r}")
    env = dict(os.environ, FORKTRACE_JOIN="nohostport")
    r = t.forktrace(["run", "--", "true"], env=env)
    check(r.rc == 2 and "FORKTRACE_JOIN" in r.err, f"a bad FORKTRACE_JOIN: rc {r.rc} {r.err!r}")
    # --no-remote and --listen make the variable no concern of this run.
    r = t.forktrace(["run", "--no-remote", "-o", "t.json", "--", "true"], env=env)
    check(r.rc == 0, f"--no-remote with FORKTRACE_JOIN set: {r.describe()}")
    h = t.forktrace(["run", "--help"])
    for opt in ("--listen", "--join", "--node-output", "--remote-forktrace", "--no-remote",
                "FORKTRACE_JOIN"):
        check(opt in h.out, f"--help does not mention {opt}")
    for hidden in ("--launcher-pid", "--launched-as"):
        check(hidden not in h.out, f"--help shows the hidden {hidden}")


if __name__ == "__main__":
    ft.main()
