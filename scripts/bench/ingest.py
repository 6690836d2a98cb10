#!/usr/bin/env python3
"""The head's ingest of node collectors (docs/MULTIHOST.md): N node
collectors on this machine (`forktrace run --join`, over TCP on 127.0.0.1)
each trace scripts/bench/calls.c's `fib 1` (22,700,000 instrumented calls:
45,400,000 enter and exit records) at the same time, into one head
(`forktrace run --listen`).

Measured, from the nodes' start until the last node has exited (a node
exits once the head acknowledged its END: its whole part is in the
head's model):
  - the wall time, the records in all and their bytes (a part's model
    stream, measured once: one node's part written to a node-output file),
    records/s and MB/s over the wall time;
  - the head's CPU time over the same span (utime + stime from /proc), and
    the MB/s that makes: what the head can take per CPU second, whoever
    else competes for the CPUs (the nodes' programs run on the same
    machine);
  - the head's peak RSS (VmHWM), and its peak anonymous memory (RssAnon,
    sampled), against --max-memory.
The trace itself is not written (the head is killed once measured): that
is the writers' benchmark, not the ingest's.

Usage: scripts/bench/ingest.py [--build DIR] [--nodes N] [--max-memory SIZE]
"""
import argparse
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(os.path.dirname(HERE))
CALLS = 22_700_000


def build_calls(tmp):
    out = os.path.join(tmp, "calls")
    subprocess.run(["cc", "-O2", "-finstrument-functions", "-pthread", "-I",
                    os.path.join(TOP, "include"), "-o", out, os.path.join(HERE, "calls.c")],
                   check=True)
    return out


def cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def status_kb(pid, key):
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(key + r":\s+(\d+)", f.read()).group(1))


def part_bytes(ft, calls, env, tmp):
    """The model stream of one node's part: its node-output file's size
    (the node cannot reach a head: nothing listens on the port)."""
    s = __import__("socket").socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    out = os.path.join(tmp, "parts")
    os.makedirs(out)
    subprocess.run([ft, "run", "--join", f"127.0.0.1:{port}", "--node-output", out, "-q", "--",
                    calls, "fib", "1"], env=env, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, cwd=tmp)
    files = os.listdir(out)
    return os.path.getsize(os.path.join(out, files[0]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(TOP, "build"))
    ap.add_argument("--nodes", type=int, default=8)
    ap.add_argument("--max-memory", default="256M")
    a = ap.parse_args()
    ft = os.path.join(a.build, "bin", "forktrace")
    tmp = tempfile.mkdtemp(prefix="ft-ingest-")
    env = dict(os.environ, TMPDIR=tmp, FORKTRACE_KEY_DIR=os.path.join(tmp, "keys"))
    head = None
    try:
        calls = build_calls(tmp)
        per_node = part_bytes(ft, calls, env, tmp)
        flag = os.path.join(tmp, "flag")
        head = subprocess.Popen([ft, "run", "--listen", "127.0.0.1:0", "--max-memory",
                                 a.max_memory, "-o", os.path.join(tmp, "t.json"), "--", "sh",
                                 "-c", f"while [ ! -e {flag} ]; do sleep 0.05; done"],
                                env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                cwd=tmp, start_new_session=True)
        line = b""
        while not line.endswith(b"\n"):
            select.select([head.stderr], [], [], 10)
            line += os.read(head.stderr.fileno(), 1)
        addr = line.decode().split("--join ")[1].split()[0]
        cpu0 = cpu_s(head.pid)
        t0 = time.monotonic()
        nodes = [subprocess.Popen([ft, "run", "--join", addr, "-q", "--", calls, "fib", "1"],
                                  env=env, stdout=subprocess.DEVNULL, cwd=tmp)
                 for _ in range(a.nodes)]
        anon = 0
        while any(p.poll() is None for p in nodes):
            anon = max(anon, status_kb(head.pid, "RssAnon"))
            time.sleep(0.02)
        rcs = [p.wait() for p in nodes]
        wall = time.monotonic() - t0
        cpu = cpu_s(head.pid) - cpu0
        hwm = status_kb(head.pid, "VmHWM")
        anon = max(anon, status_kb(head.pid, "RssAnon"))
        if any(rcs):
            sys.exit(f"a node failed: {rcs}")
        total = per_node * a.nodes
        records = 2 * CALLS * a.nodes
        print(f"nodes {a.nodes}, each fib 1: {2 * CALLS:,} records, {per_node / 1e6:.1f} MB "
              f"of model stream")
        print(f"all in after {wall:.2f} s: {records / wall / 1e6:.1f} M records/s, "
              f"{total / wall / 1e6:.0f} MB/s (wall, {os.cpu_count()} CPUs shared with the "
              f"nodes' programs)")
        print(f"head CPU {cpu:.2f} s: {total / cpu / 1e6:.0f} MB/s per head CPU second"
              if cpu > 0 else "head CPU: below the clock tick")
        print(f"head peak RSS {hwm / 1024:.0f} MiB, of it anonymous memory {anon / 1024:.0f} "
              f"MiB (sampled every 20 ms; --max-memory {a.max_memory}: past it, parts go "
              f"to a spill file in TMPDIR, mapped shared, whose pages count in RSS while "
              f"resident)")
    finally:
        if head is not None:
            os.killpg(head.pid, signal.SIGKILL)
            head.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
