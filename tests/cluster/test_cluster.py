#!/usr/bin/env python3
"""The simulated cluster itself (cluster.py), and the launchers the
multi-host tests trace, run on it untraced: if these fail, a multi-host
test's failure says nothing about forktrace."""
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "e2e"))
import ftcheck as ft  # noqa: E402
from ftcheck import Skip, check, test  # noqa: E402
import cluster as cl  # noqa: E402


def start_cluster(t, n, **kw):
    """A Cluster of n nodes in the test's directory; a skip where the
    machine cannot host one."""
    try:
        return cl.Cluster(n, t.path("cluster"), **kw)
    except cl.ClusterUnavailable as e:
        raise Skip(str(e))


def out_of(r, what):
    check(r.returncode == 0, f"{what}: exit {r.returncode}\nstdout: {r.stdout!r}\n"
          f"stderr: {r.stderr.decode(errors='replace')[-2000:]}")
    return r.stdout.decode()


def links_and_netns():
    """The machine's network devices and named network namespaces."""
    links = subprocess.run(["ip", "-o", "link", "show"], stdout=subprocess.PIPE, check=True)
    names = {line.split(":")[1].strip().split("@")[0] for line in links.stdout.decode().splitlines()}
    netns = subprocess.run(["ip", "netns", "list"], stdout=subprocess.PIPE, check=True)
    return names, netns.stdout.decode()


@test
def test_smoke(t):
    """Three nodes and a head: names resolve and ssh works from the head,
    each host's clocks are offset by its own number of seconds, pids start
    from 1 on every host, /tmp is private and the shared directory shared,
    and teardown leaves no process, namespace or device."""
    before = links_and_netns()
    t0 = time.monotonic()
    c = start_cluster(t, 3)
    with c:
        start_s = c.start_seconds
        head = lambda argv: c.run_on("head", argv)  # noqa: E731
        check(out_of(head(["ssh", "node2", "hostname"]), "ssh node2 hostname") == "node2\n",
              "ssh node2 hostname did not print node2")
        check(out_of(head(["hostname"]), "hostname on the head") == "head\n", "head's hostname")

        # One ssh per node, right after the head's own clock reading:
        # (monotonic, boottime, /proc/uptime), whether pid 1 is the host's
        # init, the pid of the session's shell, the hostname; and a file
        # in its /tmp and one in the shared directory.
        clocks = "import time; print(time.monotonic(), time.clock_gettime(time.CLOCK_BOOTTIME))"
        probe = ("/usr/bin/python3 -c '%s'; cut -d' ' -f1 /proc/uptime; "
                 "tr '\\0' ' ' < /proc/1/cmdline; echo; echo $$; hostname; "
                 "echo $(hostname) > /tmp/mine; echo $(hostname) > %s/from-$(hostname)" % (clocks, c.shared))
        inits = set()
        for name in ["head"] + c.nodes:
            argv = ["sh", "-c", probe] if name == "head" else ["ssh", name, probe]
            r = head(["sh", "-c", f"/usr/bin/python3 -c '{clocks}'; " + " ".join(
                "'" + a.replace("'", "'\\''") + "'" for a in argv)])
            lines = out_of(r, f"probe of {name}").splitlines()
            mono_h, boot_h = (float(x) for x in lines[0].split())
            mono_n, boot_n = (float(x) for x in lines[1].split())
            uptime_n = float(lines[2])
            init_cmd, shell_pid, hostname = lines[3:6]
            for what, diff in (("CLOCK_MONOTONIC", mono_n - mono_h), ("CLOCK_BOOTTIME", boot_n - boot_h),
                               ("/proc/uptime", uptime_n - boot_h)):
                check(abs(diff - c.offset(name)) < 5,
                      f"{name}'s {what} is {diff:.3f} s from the head's, not {c.offset(name)} s")
            # Every host's init is pid 1 of its own pid namespace, and a
            # session's processes get small pids that collide across hosts.
            check("--init" in init_cmd and f'"name": "{name}"' in init_cmd,
                  f"pid 1 on {name} is not its init: {init_cmd!r}")
            check(hostname == name, f"hostname on {name}: {hostname!r}")
            check(int(shell_pid) < 100, f"a shell on {name} has pid {shell_pid}: not a pid namespace of its own")
            inits.add(c.hosts[name].init_pid)
        check(len(inits) == 4, f"the machine's pids of the inits: {inits}")
        check(len({c.offset(n) for n in c.hosts}) == 4, "two hosts have the same clock offset")

        # /tmp is each host's own; everything outside it is shared.
        everyone = sorted(["head"] + c.nodes)
        for name in c.nodes:
            text = out_of(head(["ssh", name, f"ls /tmp; cat {c.shared}/from-*; getent hosts node1 head"]),
                          f"reading on {name}")
            check(text.split() == ["mine"] + everyone + [c.addr("node1"), "node1", c.addr("head"), "head"],
                  f"/tmp, the shared files and the names on {name}: {text!r}")
        check(sorted(os.listdir(c.shared)) == [f"from-{n}" for n in everyone],
              f"the shared directory seen from the machine: {os.listdir(c.shared)}")
        check(not os.path.exists("/tmp/mine"), "a host's /tmp file is on the machine's /tmp")
        # An ssh session has the environment of a login, not the test's.
        env = out_of(head(["ssh", "node1", "env"]), "env on node1")
        check("FT_E2E_TMP" not in env and "TMPDIR" not in env, f"the test's environment reached node1: {env}")
        # kill_host: a crashed machine is gone as a whole, the others stay.
        c.kill_host("node3")
        r = head(["ssh", "-o", "ConnectTimeout=1", "node3", "true"])
        check(r.returncode == 255, f"ssh to a killed host: exit {r.returncode}")
        check(out_of(head(["ssh", "node1", "hostname"]), "node1 after node3 died") == "node1\n",
              "node1 after node3 died")
    total_s = time.monotonic() - t0
    check(c.leftovers(timeout=0) == [], f"left after teardown: {c.leftovers(timeout=0)}")
    check(links_and_netns() == before, f"network devices or namespaces differ after teardown: "
          f"{links_and_netns()} vs {before}")
    for h in c.hosts.values():
        try:
            with open(f"/proc/{h.init_pid}/cmdline", "rb") as f:
                cmdline = f.read()
        except OSError:
            cmdline = b""
        check(c.workdir.encode() not in cmdline, f"init {h.init_pid} of {h.name} is still there")
    print(f"cluster of 3 nodes and a head: up in {start_s:.2f} s, test {total_s:.2f} s")
    check(start_s < 5, f"the cluster took {start_s:.2f} s to start")


@test
def test_untraced_launchers(t):
    """pdsh, GNU parallel --sshlogin and mpirun across hosts work on the
    cluster without forktrace, with nothing but the cluster's ssh config
    (the incantations of tests/cluster/README.md)."""
    c = start_cluster(t, 3)
    with c:
        r = c.run_on("head", ["pdsh", "-R", "ssh", "-w", "node[1-3]", "hostname"])
        lines = sorted(out_of(r, "pdsh").splitlines())
        check(lines == [f"{n}: {n}" for n in c.nodes], f"pdsh: {lines}")
        r = c.run_on("head", ["parallel", "--sshlogin", "node1,node2,node3", "--nonall", "hostname"])
        check(sorted(out_of(r, "parallel").split()) == c.nodes, f"parallel --nonall: {r.stdout!r}")
        if os.environ.get("FT_MPI_SKIP"):
            raise Skip(os.environ["FT_MPI_SKIP"])
        marks = ft.prog("mpi_marks")
        r = c.run_on("head", ["mpirun", "--allow-run-as-root", "-np", "4", "--host", "node1:2,node2:2",
                              marks], timeout=30)
        lines = sorted(out_of(r, "mpirun").splitlines())
        want = sorted(f"mpi_marks rank {r} of 4 on {'node1' if r < 2 else 'node2'}" for r in range(4))
        check(lines == want, f"mpirun: {lines}")


if __name__ == "__main__":
    ft.main()
