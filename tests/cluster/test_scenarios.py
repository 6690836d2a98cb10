#!/usr/bin/env python3
"""Multi-host runs on the simulated cluster (cluster.py): forktrace on the
head traces jobs that launchers start on other hosts through real sshd, and
each test reads the trace. Every host's clocks are offset by its own
thousands of seconds and every host's pids start from 1, so a trace that
does not align clocks or keep hosts apart fails here by minutes or by
merged processes."""
import os
import re
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "e2e"))
import ftcheck as ft  # noqa: E402
from ftcheck import Skip, check, fail, test  # noqa: E402
import cluster as cl  # noqa: E402

# The port a head listens on with --listen: each cluster's head has a
# network namespace of its own, so tests side by side do not meet.
PORT = 7070


def start_cluster(t, n, **kw):
    try:
        return cl.Cluster(n, t.path("cluster"), **kw)
    except cl.ClusterUnavailable as e:
        raise Skip(str(e))


class Run:
    """A finished command on a host: rc, out, err (text), elapsed."""

    def __init__(self, argv, rc, out, err, elapsed):
        self.argv, self.rc, self.out, self.err, self.elapsed = argv, rc, out, err, elapsed

    def describe(self):
        return (f"command: {' '.join(self.argv)}\n  exit {self.rc} after {self.elapsed:.2f} s\n"
                f"  stdout: {self.out[-2000:]!r}\n  stderr: {self.err[-3000:]!r}")


def run_on(c, host, argv, timeout=45, env=None, stdin=subprocess.DEVNULL):
    t0 = time.monotonic()
    try:
        r = c.run_on(host, argv, timeout=timeout, env=env, stdin=stdin)
    except subprocess.TimeoutExpired as e:
        fail(f"{' '.join(argv)} on {host} did not end within {timeout} s "
             f"(stderr: {(e.stderr or b'')[-2000:]!r})")
    return Run(argv, r.returncode, r.stdout.decode(errors="replace"),
               r.stderr.decode(errors="replace"), time.monotonic() - t0)


def finish(p, argv, timeout=45):
    t0 = time.monotonic()
    early = b"".join(getattr(p, "early_err", []))
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        fail(f"{' '.join(argv)} did not end within {timeout} s; stderr: {(early + err)[-3000:]!r}")
    return Run(argv, p.returncode, out.decode(errors="replace"), (early + err).decode(errors="replace"),
               time.monotonic() - t0)


def start_listening_head(c, argv, timeout=20):
    """Starts a head with --listen on the head host and returns once it
    listens: when it has printed the line nodes join with (its stderr
    read so far is kept for finish)."""
    p = c.popen_on("head", argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.early_err = []

    def reader():
        for line in iter(p.stderr.readline, b""):
            p.early_err.append(line)
            if b"nodes join with" in line:
                return

    th = threading.Thread(target=reader, daemon=True)
    th.start()
    th.join(timeout)
    if not p.early_err or b"nodes join with" not in p.early_err[-1]:
        p.kill()
        fail(f"the head did not say it listens within {timeout} s: {b''.join(p.early_err)!r}")
    return p


def traced(c, t, cmd, opts=(), out="trace.json", timeout=45):
    """forktrace run [opts] -o out -- cmd on the head; (Run, path of the trace)."""
    path = os.path.join(c.shared, out)
    argv = [ft.forktrace_bin(), "run"] + list(opts) + ["-o", path, "--"] + list(cmd)
    return run_on(c, "head", argv, timeout=timeout), path


def load(res, path):
    check(os.path.exists(path), f"no trace written\n{res.describe()}")
    return ft.load_trace(path)


def hosts_of(tr):
    """otherData.forktrace.hosts by name."""
    hosts = tr.meta.get("hosts")
    check(isinstance(hosts, list), f"no otherData.forktrace.hosts in {tr.path}: {tr.meta}")
    return {h.get("name"): h for h in hosts}


def on_host(tr, host, **kw):
    return [p for p in tr.find(**kw) if p.rec.get("host") == host]


def check_hosts(tr, want, res=None):
    """Each host named in want has that state, and a node with a complete
    part was put on the head's clock by measurement with an error bound."""
    hosts = hosts_of(tr)
    for name, state in want.items():
        h = hosts.get(name)
        check(h is not None, f"host {name} not in the trace's hosts: {list(hosts)}"
              + (f"\n{res.describe()}" if res else ""))
        check(h.get("state") == state, f"host {name}: state {h.get('state')!r}, not {state!r}: {h}")
        if state in ("complete", "lost") and name != "head":
            check(h.get("clock") == "measured", f"host {name}'s clock: {h}")
            check(isinstance(h.get("err_ns"), int) and h["err_ns"] >= 0, f"host {name}'s error bound: {h}")
    return hosts


def check_on_head_clock(tr, c, procs, res):
    """The processes' lifetimes lie inside the head's run: on the head's
    clock, not thousands of seconds off on their host's own."""
    head_start, head_end = tr.meta.get("start_ns"), tr.meta.get("end_ns")
    for p in procs:
        s, e = p.rec.get("start_ns"), p.rec.get("end_ns")
        check(isinstance(s, int) and head_start - 10**9 <= s <= head_end + 10**9,
              f"{p.describe()} on {p.rec.get('host')} starts at {s}, outside the run "
              f"[{head_start}, {head_end}]: not on the head's clock\n{res.describe()}")
        check(e == -1 or (isinstance(e, int) and s <= e <= head_end + 10**9),
              f"{p.describe()} ends at {e}, outside the run [{head_start}, {head_end}]")


def check_launched_from(tr, p, launcher_name="ssh"):
    """p (on a node) descends from a launcher process (ssh) on the head."""
    up = tr.ancestors(p)
    heads = [a for a in up if a.rec.get("host") == "head"]
    check(heads, f"{p.describe()} has no ancestor on the head: {up}\n{tr.dump()}")
    check(heads[0].rec.get("name") == launcher_name,
          f"the first ancestor on the head of {p.describe()} is {heads[0].describe()}, "
          f"not {launcher_name}\n{tr.dump()}")
    return heads[0]


# --------------------------------------------------------------------------


@test
def test_mpirun(t):
    """mpirun -np 4 across node1 and node2 (Open MPI starting its orted
    through ssh): every process on both hosts, with its host, the right
    parents and its rank; the marks each rank makes right after an
    MPI_Barrier line up on the head's clock within 1 ms, although node1's
    and node2's clocks are 1000 s apart."""
    if os.environ.get("FT_MPI_SKIP"):
        raise Skip(os.environ["FT_MPI_SKIP"])
    marks = ft.prog("mpi_marks")
    c = start_cluster(t, 2)
    with c:
        # Ranks that wait yield the CPU: four ranks share the machine's cores.
        cmd = ["mpirun", "--allow-run-as-root", "--mca", "mpi_yield_when_idle", "1", "-np", "4",
               "--host", "node1:2,node2:2", marks]
        plain = run_on(c, "head", cmd)
        check(plain.rc == 0, f"mpirun untraced\n{plain.describe()}")
        res, path = traced(c, t, cmd)
        check(res.rc == 0, f"traced mpirun\n{res.describe()}")
        check(sorted(res.out.splitlines()) == sorted(plain.out.splitlines()),
              f"output differs from the untraced run's: {res.out!r} vs {plain.out!r}")
        tr = load(res, path)
        hosts = check_hosts(tr, {"head": "complete", "node1": "complete", "node2": "complete"}, res)
        root = tr.root()
        check(root.name in ("mpirun", "orterun"), f"root: {root.describe()}")
        ranks = {}
        for node, want in (("node1", {0, 1}), ("node2", {2, 3})):
            daemons = on_host(tr, node, name="orted")
            ft.assert_count(daemons, 1, f"orted on {node}", tr)
            check_launched_from(tr, daemons[0])
            check(root in tr.ancestors(daemons[0]), f"orted on {node} is not under mpirun\n{tr.dump()}")
            procs = on_host(tr, node, name="mpi_marks")
            ft.assert_count(procs, 2, f"mpi_marks on {node}", tr)
            got = set()
            for p in procs:
                check(daemons[0] in tr.ancestors(p), f"{p.describe()} is not under orted on {node}")
                ft.assert_exit(p, code=0, trace=tr)
                ft.assert_instrumented(p, True, tr)
                check(isinstance(p.rec.get("rank"), int), f"no rank on {p.describe()}: {p.rec}")
                got.add(p.rec["rank"])
                ranks[p.rec["rank"]] = p
            check(got == want, f"ranks on {node}: {got}, not {want}")
            ft.assert_count(on_host(tr, node), 3, f"processes on {node} (orted, two ranks)", tr)
            check_on_head_clock(tr, c, on_host(tr, node), res)
        # Equal pids on two hosts stay two processes.
        pids = {}
        for p in tr.all():
            pids.setdefault(p.rec.get("pid"), set()).add(p.rec.get("host"))
        colliding = sorted(p for p, h in pids.items() if len(h) > 1)
        check(colliding, f"no pid used on two hosts (every host's pids start from 1)\n{tr.dump()}")
        # The marks: for each barrier, the four ranks' instants. A rank
        # that waits for a CPU after the barrier (two cores, four ranks
        # polling) marks late, never early: the best rounds show the
        # alignment; a clock off by even a millisecond spreads every round.
        spreads = []
        i = 0
        while True:
            ts = {}
            for r, p in ranks.items():
                ev = p.marks(name=f"barrier {i}")
                check(len(ev) <= 1, f"rank {r} has {len(ev)} marks 'barrier {i}': {ev}")
                if ev:
                    ts[r] = ev[0]["ts"]
            if not ts:
                break
            check(len(ts) == 4, f"barrier {i} marked by ranks {sorted(ts)} only")
            spreads.append(max(ts.values()) - min(ts.values()))
            i += 1
        check(len(spreads) == 20, f"{len(spreads)} barriers marked, not 20")
        spreads.sort()
        for node in c.nodes:
            check(hosts[node]["err_ns"] <= 1000000, f"{node}'s clock error bound: {hosts[node]}")
        check(spreads[0] <= 1000, f"every barrier's marks spread over more than 1 ms: {spreads}; hosts {hosts}")
        print(f"barrier marks spread (us): best {spreads[0]:.1f}, median {spreads[len(spreads) // 2]:.1f}, "
              f"worst {spreads[-1]:.1f}; error bound node1 {hosts['node1']['err_ns']} ns, "
              f"node2 {hosts['node2']['err_ns']} ns ({hosts['node1']['samples']}, "
              f"{hosts['node2']['samples']} samples); {len(tr.all())} processes; pids on both hosts "
              f"{colliding}; untraced {plain.elapsed:.2f} s, traced {res.elapsed:.2f} s")


@test
def test_ssh_make(t):
    """A script on the head runs `ssh node2 'make -j2'` in the shared
    directory: make and its jobs appear on node2, under the ssh on the
    head, on the head's clock; the job's output and exit code are as
    untraced."""
    c = start_cluster(t, 2)
    with c:
        with open(os.path.join(c.shared, "Makefile"), "w") as f:
            f.write("all: a b c d\n"
                    "a b c d:\n\tsleep 0.05; echo $@ $$(hostname) > $@\n"
                    "clean:\n\trm -f a b c d\n")
        script = os.path.join(c.shared, "build.sh")
        with open(script, "w") as f:
            f.write(f"#!/bin/sh\nssh node2 'cd {c.shared} && make -s clean && make -j2'\n"
                    "rc=$?\necho build done rc=$rc\nexit $rc\n")
        os.chmod(script, 0o755)
        plain = run_on(c, "head", [script])
        check(plain.rc == 0, f"untraced\n{plain.describe()}")
        res, path = traced(c, t, [script])
        check(res.rc == 0 and res.out == plain.out, f"traced differs from untraced: "
              f"{plain.describe()}\n{res.describe()}")
        for name in "abcd":
            with open(os.path.join(c.shared, name)) as f:
                check(f.read() == f"{name} node2\n", f"file {name}")
        tr = load(res, path)
        check_hosts(tr, {"head": "complete", "node2": "complete"}, res)
        make = on_host(tr, "node2", name="make")
        ft.assert_count(make, 2, "make processes on node2 (clean, all)", tr)
        ssh = check_launched_from(tr, make[0])
        check(tr.root() in tr.ancestors(ssh), f"ssh is not under the script\n{tr.dump()}")
        jobs = [p for p in on_host(tr, "node2", name="sleep")]
        ft.assert_count(jobs, 4, "the make jobs' sleeps on node2", tr)
        check_on_head_clock(tr, c, on_host(tr, "node2"), res)
        check(not on_host(tr, "node1"), "processes on node1, where nothing ran")


@test
def test_ssh_root(t):
    """`forktrace run -- ssh node1 CMD`: ssh is COMMAND itself, so no image
    of the tree execs it; the remote command is traced all the same, under
    the root on the head, and stdout, stderr and the exit code are ssh's
    as untraced."""
    c = start_cluster(t, 1)
    with c:
        cmd = ["ssh", "node1", "echo out $(hostname); echo err >&2; sh -c 'exit 3'"]
        plain = run_on(c, "head", cmd)
        check(plain.rc == 3 and plain.out == "out node1\n", f"untraced\n{plain.describe()}")
        res, path = traced(c, t, cmd)
        check(res.rc == plain.rc and res.out == plain.out and res.err.startswith("err\n"),
              f"traced differs from untraced:\n{plain.describe()}\n{res.describe()}")
        tr = load(res, path)
        check_hosts(tr, {"head": "complete", "node1": "complete"}, res)
        sh = on_host(tr, "node1", name="sh")
        check(sh, f"the remote command's sh is not on node1\n{tr.dump()}")
        check(check_launched_from(tr, sh[-1]) == tr.root(), f"not under the root\n{tr.dump()}")
        check_on_head_clock(tr, c, on_host(tr, "node1"), res)


def fan_out(t, cmd_of, want_lines):
    """A launcher to node1..node3 traced from the head: each node's
    processes in the trace under an ssh on the head, output as untraced."""
    c = start_cluster(t, 3)
    with c:
        cmd = cmd_of(c)
        plain = run_on(c, "head", cmd)
        check(plain.rc == 0, f"untraced\n{plain.describe()}")
        res, path = traced(c, t, cmd)
        check(res.rc == 0, f"traced\n{res.describe()}")
        check(sorted(res.out.split()) == sorted(plain.out.split()) == sorted(want_lines),
              f"output: {res.out!r}, untraced {plain.out!r}")
        tr = load(res, path)
        check_hosts(tr, {"head": "complete", "node1": "complete", "node2": "complete",
                         "node3": "complete"}, res)
        for node in c.nodes:
            procs = on_host(tr, node, name="hostname")
            ft.assert_count(procs, 1, f"hostname on {node}", tr)
            check_launched_from(tr, procs[0])
            ft.assert_exit(procs[0], code=0, trace=tr)
            check_on_head_clock(tr, c, on_host(tr, node), res)
        return tr


@test
def test_pdsh(t):
    """pdsh -R ssh -w node[1-3] hostname."""
    fan_out(t, lambda c: ["pdsh", "-R", "ssh", "-w", "node[1-3]", "hostname"],
            ["node1:", "node1", "node2:", "node2", "node3:", "node3"])


@test
def test_parallel(t):
    """GNU parallel --sshlogin node1,node2,node3 --nonall hostname (parallel
    wraps the command in its own perl on the far side)."""
    fan_out(t, lambda c: ["parallel", "--sshlogin", "node1,node2,node3", "--nonall", "hostname"],
            ["node1", "node2", "node3"])


def wait_file(path, what, p=None, timeout=20):
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if p is not None and p.poll() is not None:
            fail(f"the head ended while waiting for {what}: {p.communicate()[1][-3000:]!r}")
        if time.monotonic() > deadline:
            fail(f"timed out waiting for {what}")
        time.sleep(0.01)


def head_waiting_for(c, name):
    """A head command that ends when the shared file `name` exists."""
    return ["sh", "-c", f"while [ ! -e {c.shared}/{name} ]; do sleep 0.02; done; echo head done"]


@test
def test_listen_join(t):
    """The head listens (--listen PORT); node1 joins with --join, node2
    with FORKTRACE_JOIN in its environment, each started by something
    forktrace does not see (as srun's slurmd or a batch script would): both
    parts are in the trace, on the head's clock."""
    c = start_cluster(t, 2)
    with c:
        trace = os.path.join(c.shared, "trace.json")
        argv = [ft.forktrace_bin(), "run", "--listen", str(PORT), "-o", trace, "--"] + head_waiting_for(c, "go")
        head = start_listening_head(c, argv)
        try:
            job = ["sh", "-c", "hostname; echo $(hostname) > $(hostname).out"]
            n1 = run_on(c, "node1", [ft.forktrace_bin(), "run", "--join", f"head:{PORT}", "--"] + job)
            n2 = run_on(c, "node2", [ft.forktrace_bin(), "run", "--"] + job,
                        env={"FORKTRACE_JOIN": f"head:{PORT}"})
            for n, r in (("node1", n1), ("node2", n2)):
                check(r.rc == 0 and r.out == f"{n}\n", f"{n}'s job\n{r.describe()}")
            open(os.path.join(c.shared, "go"), "w").close()
        finally:
            res = finish(head, argv)
        check(res.rc == 0 and res.out == "head done\n", f"head\n{res.describe()}")
        tr = load(res, trace)
        check_hosts(tr, {"head": "complete", "node1": "complete", "node2": "complete"}, res)
        for node in c.nodes:
            sh = on_host(tr, node, name="sh")
            check(sh, f"no sh on {node}\n{tr.dump()}")
            check(on_host(tr, node, name="hostname"), f"no hostname on {node}\n{tr.dump()}")
            check_on_head_clock(tr, c, on_host(tr, node), res)


@test
def test_host_killed(t):
    """node2 dies (its whole pid namespace killed) while its part of the
    job runs: the head does not hang, writes the trace and exits with the
    job's code; node2's state is "lost" and its processes still running
    end "host_lost"; node1's part is whole."""
    c = start_cluster(t, 2)
    with c:
        started = os.path.join(c.shared, "started")
        script = os.path.join(c.shared, "job.sh")
        with open(script, "w") as f:
            f.write(f"#!/bin/sh\nssh node1 hostname\nssh node2 'touch {started}; exec sleep 60'\n"
                    "echo ssh to node2 exited $?\nexit 3\n")
        os.chmod(script, 0o755)
        trace = os.path.join(c.shared, "trace.json")
        argv = [ft.forktrace_bin(), "run", "--wait-timeout", "5", "-o", trace, "--", script]
        head = c.popen_on("head", argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        wait_file(started, "node2's job to start", head)
        time.sleep(0.3)
        c.kill_host("node2")
        res = finish(head, argv, timeout=30)
        check(res.rc == 3, f"exit code {res.rc}, not the job's 3\n{res.describe()}")
        check(res.out == "node1\nssh to node2 exited 255\n", f"job output\n{res.describe()}")
        check(res.elapsed < 15, f"the head took {res.elapsed:.1f} s after node2 died")
        tr = load(res, trace)
        hosts = check_hosts(tr, {"head": "complete", "node1": "complete", "node2": "lost"}, res)
        check(isinstance(hosts["node2"].get("lost_ns"), int), f"node2: {hosts['node2']}")
        sleeps = on_host(tr, "node2", name="sleep")
        ft.assert_count(sleeps, 1, "sleep on node2", tr)
        check((sleeps[0].exit or {}).get("kind") == "host_lost", f"sleep on node2: {sleeps[0].describe()}")
        check(abs(sleeps[0].rec.get("end_ns") - hosts["node2"]["lost_ns"]) < 10**9,
              f"sleep ended at {sleeps[0].rec.get('end_ns')}, node2 lost at {hosts['node2']['lost_ns']}")
        check_on_head_clock(tr, c, on_host(tr, "node2"), res)
        check(on_host(tr, "node1", name="hostname"), f"node1's hostname\n{tr.dump()}")


@test
def test_host_silent(t):
    """node2 loses power: cut off the network, then killed, so that no
    connection of it ends, it just goes quiet. The job's ssh gives up by
    its keepalive; the head, with no --wait-timeout, does not wait for
    node2 forever (it learns from its own connection: the kernel reports
    the vanished neighbour unreachable, or TCP's keepalive and user
    timeout give up on it in 15 to 20 s, else the link drops a node silent
    for LINK_IDLE_MS), so node2 is "lost" and its sleep ends "host_lost";
    the trace and the job's exit code are written."""
    c = start_cluster(t, 2)
    with c:
        started = os.path.join(c.shared, "started")
        script = os.path.join(c.shared, "job.sh")
        with open(script, "w") as f:
            f.write(f"#!/bin/sh\nssh node1 hostname\n"
                    f"ssh -o ServerAliveInterval=1 -o ServerAliveCountMax=2 node2 'touch {started}; exec sleep 60'\n"
                    "echo ssh to node2 exited $?\nexit 3\n")
        os.chmod(script, 0o755)
        trace = os.path.join(c.shared, "trace.json")
        argv = [ft.forktrace_bin(), "run", "-o", trace, "--", script]
        head = c.popen_on("head", argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        wait_file(started, "node2's job to start", head)
        time.sleep(0.3)
        c.kill_host("node2", silently=True)
        res = finish(head, argv, timeout=60)
        check(res.rc == 3, f"exit code {res.rc}, not the job's 3\n{res.describe()}")
        check(res.out == "node1\nssh to node2 exited 255\n", f"job output\n{res.describe()}")
        # ssh's keepalive (about 3 s), then the head's own detection.
        check(res.elapsed < 40, f"the head took {res.elapsed:.1f} s after node2 went quiet")
        tr = load(res, trace)
        hosts = check_hosts(tr, {"head": "complete", "node1": "complete", "node2": "lost"}, res)
        sleeps = on_host(tr, "node2", name="sleep")
        ft.assert_count(sleeps, 1, "sleep on node2 (what node2 sent before it went quiet)", tr)
        check((sleeps[0].exit or {}).get("kind") == "host_lost", f"sleep on node2: {sleeps[0].describe()}")
        check(sleeps[0].rec.get("end_ns") <= hosts["node2"]["lost_ns"] + 10**9,
              f"sleep ended at {sleeps[0].rec.get('end_ns')}, node2 lost at {hosts['node2']['lost_ns']}")


@test
def test_wrong_key(t):
    """A node collector with a wrong key for the run is refused with a
    warning naming its address, and nothing it sends is in the trace; its
    job runs as untraced; a node with the right key joins after it."""
    c = start_cluster(t, 2)
    with c:
        trace = os.path.join(c.shared, "trace.json")
        argv = [ft.forktrace_bin(), "run", "--listen", str(PORT), "-o", trace, "--"] + head_waiting_for(c, "go")
        head = start_listening_head(c, argv)
        try:
            keys = os.path.join(c.home, ".forktrace", "keys")
            deadline = time.monotonic() + 10
            while not (os.path.isdir(keys) and [k for k in os.listdir(keys) if k.endswith(".key")]):
                check(time.monotonic() < deadline and head.poll() is None, "the head made no key")
                time.sleep(0.01)
            name = [k for k in os.listdir(keys) if k.endswith(".key")][0]
            bad = os.path.join(c.shared, "badkeys")
            os.makedirs(bad, mode=0o700)
            with open(os.path.join(keys, name), "rb") as f:
                good = f.read()
            with open(os.open(os.path.join(bad, name), os.O_WRONLY | os.O_CREAT, 0o600), "wb") as f:
                # The same form (hex text), every digit another.
                f.write(bytes(b"0123456789abcdef"[(int(chr(b), 16) + 1) % 16] if chr(b) in "0123456789abcdef"
                              else b for b in good))
            job = ["sh", "-c", "echo intruder $(hostname)"]
            r = run_on(c, "node1", [ft.forktrace_bin(), "run", "--join", f"head:{PORT}", "--"] + job,
                       env={"FORKTRACE_KEY_DIR": bad})
            check(r.rc == 0 and r.out == "intruder node1\n", f"the refused node's job\n{r.describe()}")
            r2 = run_on(c, "node2", [ft.forktrace_bin(), "run", "--join", f"head:{PORT}", "--",
                                     "sh", "-c", "echo member $(hostname)"])
            check(r2.rc == 0 and r2.out == "member node2\n", f"node2's job\n{r2.describe()}")
            open(os.path.join(c.shared, "go"), "w").close()
        finally:
            res = finish(head, argv)
        check(res.rc == 0, f"head\n{res.describe()}")
        check(c.addr("node1") in res.err, f"no warning naming {c.addr('node1')}\n{res.describe()}")
        tr = load(res, trace)
        hosts = check_hosts(tr, {"head": "complete", "node2": "complete"}, res)
        check("node1" not in hosts or hosts["node1"].get("state") == "missing",
              f"node1 in the trace's hosts: {hosts.get('node1')}")
        check(not on_host(tr, "node1"), f"processes of the refused node1 in the trace\n{tr.dump()}")
        check(not [p for p in tr.all() if "intruder" in " ".join(p.rec.get("argv") or [])],
              f"the intruder's command is in the trace\n{tr.dump()}")
        check(on_host(tr, "node2", name="sh"), f"node2's part\n{tr.dump()}")


@test
def test_head_unreachable(t):
    """A node collector that cannot reach the head writes its part to
    --node-output; its job runs as untraced; forktrace combine merges the
    part with the head's trace later, on the head's clock (by the realtime
    anchors: the part has no clock measurement)."""
    c = start_cluster(t, 2)
    with c:
        parts = os.path.join(c.shared, "parts")
        os.makedirs(parts)
        trace = os.path.join(c.shared, "trace.json")
        argv = [ft.forktrace_bin(), "run", "--listen", str(PORT), "-o", trace, "--"] + head_waiting_for(c, "go")
        head = start_listening_head(c, argv)
        try:
            # Port 1 on the head: nothing listens, the connection is refused.
            r = run_on(c, "node2", [ft.forktrace_bin(), "run", "--join", "head:1", "--node-output", parts,
                                    "--", "sh", "-c", "echo cut off $(hostname); exit 4"])
            check(r.rc == 4 and r.out == "cut off node2\n", f"node2's job\n{r.describe()}")
            files = [f for f in os.listdir(parts) if f.endswith(".ftnode")]
            check(len(files) == 1 and files[0].startswith("node2-"), f"node-output: {files}\n{r.describe()}")
            check(parts in r.err, f"the node did not say where its part went\n{r.describe()}")
            open(os.path.join(c.shared, "go"), "w").close()
        finally:
            res = finish(head, argv)
        check(res.rc == 0, f"head\n{res.describe()}")
        combined = os.path.join(c.shared, "all.json")
        comb = run_on(c, "head", [ft.forktrace_bin(), "combine", trace, os.path.join(parts, files[0]),
                                  "-o", combined])
        check(comb.rc == 0, f"combine\n{comb.describe()}")
        tr = load(comb, combined)
        hosts = hosts_of(tr)
        check(hosts.get("node2", {}).get("clock") == "realtime anchor", f"node2 in the combined trace: {hosts}")
        sh = on_host(tr, "node2", name="sh")
        ft.assert_count(sh, 1, "node2's sh", tr)
        ft.assert_exit(sh[0], code=4, trace=tr)
        check_on_head_clock(tr, c, on_host(tr, "node2"), comb)


@test
def test_forktrace_missing(t):
    """forktrace is not installed on node2 (an empty directory over the
    build's bin there): pdsh's job runs on all three nodes unchanged,
    node2's part is reported untraced by name, node1's and node3's are in
    the trace."""
    c = start_cluster(t, 3)
    with c:
        c.mount_empty("node2", os.path.dirname(ft.forktrace_bin()))
        cmd = ["pdsh", "-R", "ssh", "-w", "node[1-3]", "hostname"]
        plain = run_on(c, "head", cmd)
        res, path = traced(c, t, cmd)
        check(res.rc == plain.rc == 0 and sorted(res.out.split()) == sorted(plain.out.split()),
              f"traced differs from untraced\n{plain.describe()}\n{res.describe()}")
        check(re.search(r"^forktrace: host node2: part missing: .*", res.err, re.M),
              f"the summary does not name node2\n{res.describe()}")
        tr = load(res, path)
        hosts = check_hosts(tr, {"head": "complete", "node1": "complete", "node3": "complete",
                                 "node2": "missing"}, res)
        check(hosts["node2"].get("why"), f"node2: {hosts['node2']}")
        check(not on_host(tr, "node2"), f"processes on node2\n{tr.dump()}")
        for node in ("node1", "node3"):
            ft.assert_count(on_host(tr, node, name="hostname"), 1, f"hostname on {node}", tr)


if __name__ == "__main__":
    ft.main()
