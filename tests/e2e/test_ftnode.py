#!/usr/bin/python3
"""End-to-end tests of node-output files (NAME.ftnode, docs/TRACE_FORMAT.md,
"Model stream") as inputs of `forktrace combine`, `info` and `report`.

The files hold real traced processes: tests/progs/ev_prog runs under the
agent with no collector, so it spills; tests/collector/ftnode_write reads
the spill files the way combine does and writes their model as a node-output
file (the model stream's file writer, the one a node collector uses)."""

import json
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ftcheck as ft  # noqa: E402
from ftcheck import check, prog, test  # noqa: E402

SUMMARY_RE = re.compile(r"^forktrace: combined \d+ files?, (\d+) events, (\d+) processes "
                        r"\((\d+) pids remapped\)", re.M)


def spill_files(t, name="spill"):
    """A directory of real spill files: ev_prog forks a child and execs, with
    threads recording regions, under the agent and without a collector."""
    d = t.subdir(name)
    os.chmod(d, 0o700)
    bindir = os.path.dirname(ft.forktrace_bin())
    env = {k: v for k, v in os.environ.items() if not k.startswith("FORKTRACE_")}
    env.update(LD_PRELOAD=os.path.join(bindir, "libforktrace-agent.so"), FORKTRACE_SPILL=d)
    r = subprocess.run([prog("ev_prog"), "forkexec", "2", "20"], env=env, cwd=t.dir,
                       capture_output=True, timeout=30)
    check(r.returncode == 0, f"ev_prog failed: {r.stderr!r}")
    check(any(n.endswith(".ftspill") for n in os.listdir(d)), f"nothing spilled in {d}")
    return d


def ftnode_write(t, out, host, spill):
    bindir = os.path.dirname(ft.forktrace_bin())
    r = subprocess.run([os.path.join(bindir, "ftnode_write"), t.path(out), host, spill],
                       cwd=t.dir, capture_output=True, timeout=30)
    check(r.returncode == 0, f"ftnode_write failed: {r.stderr!r}")
    return t.path(out)


def combine(t, inputs, out, expect_rc=0):
    res = t.forktrace(["combine"] + list(inputs) + ["-o", out])
    check(res.rc == expect_rc, f"exit {res.rc}, expected {expect_rc}\n  {res.describe()}")
    res.doc = ft.load_json(t.path(out))
    res.summary = SUMMARY_RE.search(res.err)
    check(res.summary, f"no summary line\n  {res.describe()}")
    return res


def without_host(events, host):
    """The events with what a node's host adds taken out: the host of each
    forktrace_process record and the host in front of process labels."""
    out = []
    for e in events:
        e = json.loads(json.dumps(e))
        args = e.get("args") or {}
        if e.get("name") == "forktrace_process" and args.get("host") == host:
            args["host"] = None
        if e.get("name") == "process_labels" and args.get("labels", "").startswith(host + ", "):
            args["labels"] = args["labels"][len(host) + 2:]
        out.append(e)
    return out


def procs(doc):
    return {e["pid"] for e in doc["traceEvents"] if e.get("ph") == "M" and
            e.get("name") == "process_name"}


@test
def ftnode_inputs(t):
    """A node-output file gives the trace its processes gave: combine of the
    .ftnode writes the very events combine of the spill files writes (every
    field of the model crossed the stream: images, threads, in-process
    events, exits), with the node's host among the inputs; info and report
    take it too."""
    spill = spill_files(t)
    node = ftnode_write(t, "node1.ftnode", "node1", spill)
    a = combine(t, [spill], "from-spill.json")
    b = combine(t, [node], "from-node.json")
    check(len(a.doc["traceEvents"]) > 50, f"too few events: {a.summary.group(0)}")
    hosts = {e["args"].get("host") for e in b.doc["traceEvents"]
             if e.get("name") == "forktrace_process"}
    check(hosts == {"node1"}, f"processes' hosts: {hosts}")
    check(a.doc["traceEvents"] == without_host(b.doc["traceEvents"], "node1"),
          f"the events differ:\n  {a.describe()}\n  {b.describe()}")
    inputs = b.doc["otherData"]["forktrace"]["inputs"]
    check(inputs[0].get("path") == node and inputs[0].get("host") == "node1",
          f"inputs: {inputs}")
    check("warning" not in b.err, f"a warning for a whole file:\n  {b.describe()}")
    # Found by content under another name.
    shutil.copy(node, t.path("renamed.bin"))
    c = combine(t, ["renamed.bin"], "renamed.json")
    check(c.doc["traceEvents"] == b.doc["traceEvents"], f"by content:\n  {c.describe()}")

    res = t.forktrace(["info", "--tree", node])
    check(res.rc == 0 and "processes:  2" in res.out and "ev_prog" in res.out,
          f"info:\n  {res.describe()}")
    res = t.forktrace(["report", node, "-o", "r.html"])
    check(res.rc == 0 and os.path.getsize(t.path("r.html")) > 1000, f"report:\n  {res.describe()}")


def check_lost(doc, host, res):
    """The part of host is lost, and none of its processes is left without
    an end or a known way it ended."""
    hosts = [h for h in doc["otherData"]["forktrace"].get("hosts") or [] if h.get("name") == host]
    check(len(hosts) == 1 and hosts[0].get("state") == "lost",
          f"the part of {host} is not lost: {hosts}\n  {res.describe()}")
    for e in doc["traceEvents"]:
        if e.get("name") != "forktrace_process":
            continue
        a = e["args"]
        check(a.get("end_ns", -1) >= 0 and (a.get("exit") or {}).get("kind")
              not in (None, "unknown", "running"),
              f"process {e.get('pid')} left open: {a}\n  {res.describe()}")


@test
def ftnode_truncated(t):
    """A node that died while writing its file: combine keeps every process
    before the cut, warns naming the file and where it ends, and exits 0 (as
    for a spill file cut short); a file damaged inside is a problem (exit
    1), and what came before the damage is kept."""
    spill = spill_files(t)
    node = ftnode_write(t, "node1.ftnode", "node1", spill)
    with open(node, "rb") as f:
        whole = f.read()
    cut = t.path("cut.ftnode")
    with open(cut, "wb") as f:
        f.write(whole[:len(whole) * 2 // 3])
    res = combine(t, [cut], "cut.json")
    check(re.search(r"warning: .*cut\.ftnode: ends inside record \d+, \d+ bytes into it \(the node "
                    r"stopped writing\); the \d+ processes before it are kept", res.err),
          f"no warning:\n  {res.describe()}")
    check(len(procs(res.doc)) >= 1, f"nothing kept:\n  {res.describe()}")
    check_lost(res.doc, "node1", res)
    # Cut between records: no END.
    with open(t.path("noend.ftnode"), "wb") as f:
        f.write(whole[:-6])
    res = combine(t, ["noend.ftnode"], "noend.json")
    check(re.search(r"noend\.ftnode: ends after record \d+, without END", res.err),
          f"no END not said:\n  {res.describe()}")
    full = combine(t, [node], "full.json")
    check(res.doc["traceEvents"] == full.doc["traceEvents"],
          "a file without END lost events it holds")
    check_lost(res.doc, "node1", res)
    # Damaged: a record whose kind byte is broken.
    bad = bytearray(whole)
    bad[8 + 4] = 0xc1  # the first record's msgpack: a byte msgpack never uses
    with open(t.path("bad.ftnode"), "wb") as f:
        f.write(bad)
    res = combine(t, ["bad.ftnode"], "bad.json", expect_rc=1)
    check(re.search(r"bad\.ftnode: record 1 \(unknown\): not one msgpack object", res.err),
          f"damage not named:\n  {res.describe()}")


@test
def ftnode_directory(t):
    """A directory of node-output files (the shared --node-output directory
    of a run whose head was unreachable): each file is one host's part, an
    input of its own; equal pids of two hosts stay two processes."""
    spill = spill_files(t)
    d = t.subdir("parts")
    ftnode_write(t, "parts/node1-100.ftnode", "node1", spill)
    ftnode_write(t, "parts/node2-100.ftnode", "node2", spill)
    one = combine(t, [t.path("parts/node1-100.ftnode")], "one.json")
    res = combine(t, [d], "both.json")
    n = len(procs(one.doc))
    check(int(res.summary.group(2)) == 2 * n and int(res.summary.group(3)) == n,
          f"expected {2 * n} processes, {n} remapped:\n  {res.describe()}")
    hosts = [i.get("host") for i in res.doc["otherData"]["forktrace"]["inputs"]]
    check(hosts == ["node1", "node2"], f"inputs' hosts: {hosts}")
    res = t.forktrace(["info", "--tree", d])
    check(res.rc == 0 and res.out.count("processes:  2") == 2, f"info:\n  {res.describe()}")


@test
def ftnode_from_node_run(t):
    """A node collector that cannot reach its head (`forktrace run --join`
    to a port nobody listens on, with --node-output) writes its part to
    DIR/HOST-PID.ftnode; combine of DIR writes the very events of the
    node's own local trace (-o), and says nothing is wrong with it."""
    d = t.subdir("parts")
    res = t.forktrace(["run", "-q", "-o", "local.json", "--join", "127.0.0.1:1",
                       "--node-output", d, "--", prog("ev_prog"), "forkexec", "2", "20"])
    check(res.rc == 0, f"the node run failed:\n  {res.describe()}")
    files = [n for n in os.listdir(d) if n.endswith(".ftnode")]
    check(len(files) == 1, f"node-output files: {os.listdir(d)}\n  {res.describe()}")
    check(os.path.join(d, files[0]) in res.err, f"the run does not say where:\n  {res.describe()}")
    local = ft.load_json(t.path("local.json"))
    res = combine(t, [d], "combined.json")
    check("warning" not in res.err, f"a warning for a whole file:\n  {res.describe()}")
    check(res.doc["traceEvents"] == local["traceEvents"] and len(local["traceEvents"]) > 50,
          f"the part read back differs from the node's own trace:\n  {res.describe()}")


if __name__ == "__main__":
    ft.main()
