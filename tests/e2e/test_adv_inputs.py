#!/usr/bin/python3
"""Hostile and unusual inputs of forktrace's readers and human output:
paths in MODULE frames that are not regular files, inputs that are FIFOs,
pipes, stdin or devices, control bytes in names, duplicate keys, floods
of warnings. Each test names the defect it guards against."""

import json
import os
import re
import shutil
import stat
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ftcheck as ft  # noqa: E402
from ftcheck import check, prog, test  # noqa: E402


def function_names(tr, name):
    p = tr.one(name=name)
    return [e["name"] for e in p.events if e.get("ph") == "X" and e.get("cat") == "function"]


@test
def module_not_regular(t):
    """A program dlopens a library and then puts a FIFO, a directory, a
    link to /dev/zero or a 1 TiB sparse file at its path. The trace is
    written when the program has ended: the symbol lookup must neither
    block on the FIFO (forktrace would hang until SIGKILL) nor open the
    device; the plugin's function is named by module and offset, the rest
    of the trace is whole."""
    plugin = os.path.join(os.path.dirname(prog("adv_modswap")), "libev_plugin.so")
    for mode in ("fifo", "dir", "devzero", "sparse"):
        d = t.subdir(mode)
        lib = os.path.join(d, "libplug.so")
        shutil.copy(plugin, lib)
        res = t.forktrace(ft.Context.run_args([prog("adv_modswap"), lib, mode]), cwd=d,
                          timeout=20)
        t.load(res, expect_rc=0)
        check(res.elapsed < 8, f"{mode}: forktrace took {res.elapsed:.1f} s")
        names = function_names(res.trace, "adv_modswap")
        check("main" in names, f"{mode}: the program's own functions are not named: {names}")
        plug = [n for n in names if n.startswith("libplug.so+0x")]
        check(len(plug) == 1, f"{mode}: expected plugin_mul as libplug.so+0x..., got {names}")


@test
def module_debuglink_fifo(t):
    """The library stays, but FIFOs sit where separate debuginfo is looked
    for (LIB.debug and .debug/LIB.debug next to it): libdwfl would open
    them with a blocking open. The lookup skips them and names the
    function from the library's exported symbols. (Stripped: libdwfl
    looks for debuginfo only when the file has no .symtab of its own.)"""
    plugin = os.path.join(os.path.dirname(prog("adv_modswap")), "libev_plugin.so")
    lib = t.path("libplug.so")
    shutil.copy(plugin, lib)
    if not shutil.which("strip"):
        raise ft.Skip("strip (binutils) is not installed")
    subprocess.run(["strip", lib], check=True, timeout=30)
    res = t.forktrace(ft.Context.run_args([prog("adv_modswap"), lib, "debuglink"]), timeout=20)
    t.load(res, expect_rc=0)
    names = function_names(res.trace, "adv_modswap")
    check("plugin_mul" in names, f"plugin_mul is not named: {names}")


# Bytes a terminal acts on: C0 controls but newline, DEL, and the C1
# controls as UTF-8 (U+009B is CSI on terminals with 8-bit controls).
RAW_CONTROL = re.compile(rb"[\x00-\x09\x0b-\x1f\x7f]|\xc2[\x80-\x9f]|\xe2\x80[\xa8-\xae]")


def check_printable(what, data):
    m = RAW_CONTROL.search(data)
    check(m is None, f"{what} holds the raw control bytes {m and m.group()!r} "
          f"at {m and m.start()}: {data[max(0, (m.start() if m else 0) - 80):][:240]!r}")


HOSTILE = "\x1b]0;pwned\x07\r\x1b[2Kforktrace: 0 processes\x1b[31m\u009b1m\u202eevil"


@test
def control_bytes_in_names(t):
    """A program's argv[0], a thread name and keys of a trace file carry
    escape sequences (retitle the terminal, erase the line, forge a
    forktrace line, bidi override). forktrace info, combine's warnings
    and the run's messages print them escaped (\\x1b, \\u009b), never
    raw, where they would act on the terminal."""
    # A real program under the real agent: its name comes from argv[0].
    code = (f"import subprocess; subprocess.run([{HOSTILE!r}], executable='/bin/true', "
            f"check=True)")
    res = t.run([sys.executable, "-c", code], expect_rc=0)
    names = [p.rec.get("name") for p in res.trace.all()]
    check(any(n and "pwned" in n for n in names), f"the program's name is not in the trace: "
          f"{names}")
    info = t.forktrace(["info", "--tree", "trace.json"])
    check(info.rc == 0, f"info failed\n  {info.describe()}")
    check_printable("forktrace info's output", info.stdout + info.stderr)
    check("\\x1b]0;pwned\\x07\\r\\x1b[2Kforktrace" in info.out,
          f"info does not show the name escaped: {info.out!r}")
    # The summary and the critical path cut long names: escaped first.
    for view in ([], ["--critical-path"], ["--json"]):
        info = t.forktrace(["info"] + view + ["trace.json"])
        check(info.rc == 0 and ("pwned" in info.out or "no critical path" in info.out),
              f"info {view}\n  {info.describe()}")
        check_printable(f"forktrace info {view}'s output", info.stdout + info.stderr)
    # A trace file written by hand: names, exit kind, thread names,
    # origin, top-level keys, all with control bytes.
    bad = HOSTILE
    doc = {"traceEvents": [
        {"ph": "M", "name": "forktrace_process", "pid": 7, "tid": 7,
         "args": {"pid": 7, "parent": -1, "name": bad, "exit": {"kind": bad}}},
        {"ph": "M", "name": "thread_name", "pid": 7, "tid": 8, "args": {"name": bad}},
        {"ph": "M", "name": "forktrace_origin", "pid": 7, "tid": 7,
         "args": {"pid": bad, "input": bad}},
        {"ph": "X", "name": "x", "pid": 7, "tid": 8, "ts": 1, "dur": 1}],
        "viztracer_metadata": {"version": bad}, bad: 1}
    with open(t.path("hand.json"), "w") as f:
        json.dump(doc, f)
    info = t.forktrace(["info", "--tree", "hand.json"])
    check_printable("forktrace info's output", info.stdout + info.stderr)
    check(info.out.count("pwned") >= 3, f"info lost the names: {info.out!r}")
    info = t.forktrace(["info", "hand.json"])
    check_printable("forktrace info's summary", info.stdout + info.stderr)
    # Inputs whose file names and contents carry them, through combine
    # and report: the warnings quote both.
    d = t.subdir("in")
    with open(os.path.join(d, bad.replace("/", "_") + ".json"), "w") as f:
        f.write('{"traceEvents": [{"ph": "i", "name": "a", "pid": 1, "tid": 1, "ts": 1}], ')
        f.write(json.dumps(bad) + ': 1, "x": ')
    with open(os.path.join(d, "b.json"), "wb") as f:
        f.write(b'{"traceEvents": [], "otherData": {"k\\u001b[2J": 1}, "\\u0007": 2}')
    with open(os.path.join(d, "c.json"), "wb") as f:
        f.write(b'{"traceEvents": [], "otherData": {"k\\u001b[2J": 2}, "\\u0007": 3}')
    # A spill directory whose (empty) spill file is named so.
    sp = t.subdir("sp")
    open(os.path.join(sp, bad.replace("/", "_") + ".ftspill"), "w").close()
    for args in (["combine", "in", "-o", "out.json"], ["report", "in", "-o", "out.html"],
                 ["info", "in/b.json", "hand.json"], ["combine", "sp", "-o", "sp.json"]):
        r = t.forktrace(args)
        check(r.rc in (0, 1), f"{args[0]}: exit {r.rc}\n  {r.describe()}")
        check_printable(f"forktrace {args[0]}'s messages", r.stdout + r.stderr)


def good_trace(t):
    """A small real trace (a shell running ls): its path and event count."""
    res = t.run(["/bin/sh", "-c", "ls >/dev/null; true"], out="good.json", expect_rc=0)
    return res.out_path, len(res.trace.events)


def raw_forktrace(t, args, data=None, timeout=15):
    """forktrace with stdin a pipe that carries data (bytes; None: no
    stdin): (rc, stdout, stderr as text). Fails on a timeout (a hang)."""
    try:
        p = subprocess.run([ft.forktrace_bin()] + args, cwd=t.dir, input=data,
                           stdin=None if data is not None else subprocess.DEVNULL,
                           capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        ft.fail(f"forktrace {' '.join(args)} did not finish within {timeout} s (hung)")
    return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")


def fifo_writer(path, data):
    """Writes data into the FIFO path from a thread (blocks until a reader
    opens it); returns the thread."""
    import threading

    def write():
        try:
            with open(path, "wb") as f:
                f.write(data)
        except BrokenPipeError:
            pass
    th = threading.Thread(target=write, daemon=True)
    th.start()
    return th


def check_events(path, n, what):
    tr = ft.load_json(path)
    got = len(tr["traceEvents"])
    check(got == n, f"{what}: {got} events in {path}, the input has {n}")


@test
def fifo_and_stdin_inputs(t):
    """combine, info and report read a FIFO, a pipe on /dev/stdin and '-'
    (stdin), plain, gzip and HDF5, also with --align (which reads its
    inputs twice). Before: combine on a FIFO hung forever (the spill-file
    sniffing opened it, read and dropped its first bytes, and the reader
    opened it again) and combine /dev/stdin lost the first 3 bytes."""
    import gzip
    good, n = good_trace(t)
    with open(good, "rb") as f:
        data = f.read()
    fifo = t.path("p")
    os.mkfifo(fifo)
    th = fifo_writer(fifo, data)
    rc, out, err = raw_forktrace(t, ["combine", "p", "-o", "fifo.json"])
    th.join(5)
    check(rc == 0, f"combine of a FIFO: exit {rc}: {err}")
    check_events(t.path("fifo.json"), n, "combine of a FIFO")
    for name, args, feed in (
            ("/dev/stdin", ["combine", "/dev/stdin", "-o", "stdin.json"], data),
            ("- (gzip)", ["combine", "-", "-o", "stdin.json"], gzip.compress(data)),
            ("-, --align", ["combine", "--align", "-", "good.json", "-o", "stdin.json"], data)):
        rc, out, err = raw_forktrace(t, args, feed)
        check(rc == 0, f"combine {name}: exit {rc}: {err}")
        if "--align" in args:
            check_events(t.path("stdin.json"), 2 * n + 4, f"combine {name}")
        else:
            check_events(t.path("stdin.json"), n, f"combine {name}")
    th = fifo_writer(fifo, data)
    rc, out, err = raw_forktrace(t, ["combine", "--align", "p", "good.json", "-o", "al.json"])
    th.join(5)
    check(rc == 0, f"combine --align of a FIFO: exit {rc}: {err}")
    check_events(t.path("al.json"), 2 * n + 4, "combine --align of a FIFO")
    rc, out, err = raw_forktrace(t, ["info", "--tree", "-"], gzip.compress(data))
    check(rc == 0 and "gzip" in out and "sh [exit 0]" in out, f"info -: exit {rc}: {out}{err}")
    rc, out, err = raw_forktrace(t, ["report", "-", "-o", "r.html"], data)
    check(rc == 0 and os.path.getsize(t.path("r.html")) > 1000, f"report -: exit {rc}: {err}")
    # A device: read as a stream, refused at its first byte.
    rc, out, err = raw_forktrace(t, ["combine", "/dev/zero", "good.json", "-o", "dev.json"])
    check(rc == 1 and "/dev/zero" in err and "expected '{' or '['" in err,
          f"combine /dev/zero: exit {rc}: {err}")
    check_events(t.path("dev.json"), n, "combine /dev/zero good.json")
    # HDF5 through a pipe: copied to a temporary file (HDF5 seeks).
    res = t.forktrace(ft.Context.run_args(["/bin/true"], out="good.h5"))
    if res.rc == 0:
        with open(t.path("good.h5"), "rb") as f:
            h5 = f.read()
        rc, out, err = raw_forktrace(t, ["info", "-"], h5)
        check(rc == 0 and "forktrace HDF5 trace" in out, f"info - of HDF5: exit {rc}: {out}{err}")
        rc, out, err = raw_forktrace(t, ["combine", "-", "-o", "h5.json"], h5)
        check(rc == 0, f"combine - of HDF5: exit {rc}: {err}")
        left = [f for f in os.listdir(os.environ.get("TMPDIR") or "/tmp")
                if f.startswith("forktrace-input-")]
        check(not left, f"temporary copies left behind: {left}")


@test
def info_directory(t):
    """forktrace info DIR shows every trace in DIR, as combine DIR reads
    them (not 'read error: Is a directory'); a FIFO named like a trace
    in it is said not to be read, and nothing waits for a writer; spill
    files in it are shown as the trace they make."""
    good, n = good_trace(t)
    d = t.subdir("d")
    shutil.copy(good, os.path.join(d, "a.json"))
    shutil.copy(good, os.path.join(d, "b.json"))
    os.mkfifo(os.path.join(d, "c.json"))
    os.symlink("/dev/zero", os.path.join(d, "e.gz"))
    rc, out, err = raw_forktrace(t, ["info", "--tree", "d"])
    check(rc == 1, f"info d: exit {rc}, expected 1 (c.json and e.gz are not read)\n{out}{err}")
    check(out.count("sh [exit 0]") == 2, f"info d does not show a.json and b.json: {out}")
    check("d/a.json:" in out and "d/b.json:" in out, f"info d does not name the files: {out}")
    for name in ("c.json", "e.gz"):
        check(f"d/{name}: not a regular file" in err, f"nothing said of d/{name}: {err}")
    rc, out, err = raw_forktrace(t, ["combine", "d", "-o", "all.json"])
    check(rc == 1, f"combine d: exit {rc}\n{err}")
    check_events(t.path("all.json"), 2 * n + 4, "combine d")
    t.subdir("empty")
    rc, out, err = raw_forktrace(t, ["info", "empty"])
    check(rc == 1 and "a directory with no trace files" in err, f"info empty: exit {rc}: {err}")


@test
def duplicate_keys(t):
    """An event with a key twice ("pid":1,"pid":"x"; "p\\u0069d"; twice
    in args, in nested objects, in arrays of objects): the output has each
    key once, with the last value, as JSON parsers and viewers read the
    input; combine warns and exits 1, info says it repaired them. Before:
    the output had two different pid keys (the reader took the last, the
    copy kept both) and the duplicates in args."""
    doc = (b'{"traceEvents":['
           b'{"ph":"i","name":"a","pid":1,"pid":"x","tid":1,"ts":1,"s":"t",'
           b'"args":{"k":1,"k":2,"n":{"a":1,"\\u0061":[{"z":1,"z":3}]}}},'
           b'{"ph":"i","name":"b","p\\u0069d":5,"pid":6,"tid":6,"ts":2,"s":"t"},'
           b'{"ph":"i","name":"c","pid":7,"tid":7,"ts":3,"s":"t","zz":1,"zz":[1,{"q":0,"q":9}]},'
           b'{"ph":"i","name":"d","pid":8,"tid":8,"ts":4,"s":"t","args":{"u":1,"v":2}},'
           b'{ "ph" : "i" , "name" : "e" , "pid" : 9 , "tid" : 9 , "ts" : 5 , "s" : "t" , '
           b'"args" : { "a" : 1 , "b" : 2 , "c" : 3 , "d" : 4 , "e" : 5 , "f" : 6 , "g" : 7 , '
           b'"h" : 8 , "i" : 9 , "a" : [ ] , "j" : { } } },'
           b'{"ph":"i","name":"f","p\\u0069d":11,"tid":11,"ts":6,"s":"t"},'
           b'{"ph":"i","name":"g","pid":12,"tid":12,"ts":7,"s":"t","args":{"x\x96":1,"x\x89":2}}],'
           b'"t\x96":1,"t\x89":2}')
    with open(t.path("dup.json"), "wb") as f:
        f.write(doc)
    rc, out, err = raw_forktrace(t, ["combine", "dup.json", "-o", "out.json"])
    tr = ft.load_json(t.path("out.json"))  # refuses duplicate keys at any depth
    check(rc == 1, f"combine: exit {rc}, expected 1 (repaired)\n{err}")
    check("5 events with a key twice" in err, f"no warning of the duplicate keys: {err}")
    ev = {e["name"]: e for e in tr["traceEvents"] if e.get("ph") == "i"}
    origin = [e for e in tr["traceEvents"] if e.get("name") == "forktrace_origin"]
    check(len(origin) == 1 and origin[0]["args"]["pid"] == "x" and
          ev["a"]["pid"] == origin[0]["pid"], f"event a: the last pid ('x') must count: "
          f"{ev['a']}, {origin}")
    check(ev["a"]["args"] == {"k": 2, "n": {"a": [{"z": 3}]}}, f"args of a: {ev['a']['args']}")
    check(ev["b"]["pid"] == 6, f"event b: {ev['b']}")
    check(ev["c"]["zz"] == [1, {"q": 9}], f"event c: {ev['c']}")
    check(ev["d"]["args"] == {"u": 1, "v": 2}, f"event d changed: {ev['d']}")
    # A key spelled with escapes only is that key (a reader that missed
    # the pid would give the output a second one).
    check(ev["f"]["pid"] == 11, f"event f: {ev['f']}")
    # Keys that differ only in invalid UTF-8 are one key once it is
    # repaired: in args, and at the top level.
    check(ev["g"]["args"] == {"x\ufffd": 2}, f"event g: {ev['g']}")
    top = tr.get("t\ufffd")
    check(top == 1, f"top-level key t\\ufffd: {top!r}")
    check(ev["e"]["args"] == {"b": 2, "c": 3, "d": 4, "e": 5, "f": 6, "g": 7, "h": 8, "i": 9,
                              "a": [], "j": {}}, f"event e (ten keys): {ev['e']}")
    rc, out, err = raw_forktrace(t, ["info", "dup.json"])
    check(rc == 1 and "5 events with a key twice" in out, f"info: exit {rc}: {out}{err}")


SHM_PEER = r"""
import os, socket, struct, sys, time
import msgpack

def frame(mtype, fields):
    payload = msgpack.packb(fields, use_bin_type=True)
    return b"FT" + bytes([1, mtype]) + struct.pack("<I", len(payload)) + payload

env = dict(e.split(b"=", 1) for e in open("/proc/self/environ", "rb").read().split(bytes(1))
           if b"=" in e)
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(env[b"FORKTRACE_SOCK"].decode())
stat = open("/proc/self/stat").read()
ticks = int(stat[stat.rfind(")") + 2:].split()[19])
pid, ts = os.getpid(), time.monotonic_ns()
s.sendall(frame(1, {1: ts, 2: pid, 3: pid, 4: os.getppid(), 11: ticks, 7: ["peer"],
                    9: sys.executable}))
r, w = os.pipe()
n = int(sys.argv[1])
for i in range(n):
    # A pipe is no event buffer: each frame is implausible.
    socket.send_fds(s, [frame(15, {1: ts + i, 2: pid, 22: 0, 18: 1, 29: 4096})], [r])
s.sendall(frame(10, {1: ts + n + 1, 2: pid, 14: 0}))
s.close()
print("sent", n)
"""


@test
def warning_flood(t):
    """A process sends 500 implausible event-buffer frames: forktrace
    prints a few warnings and one count of the rest ("500 more not shown"),
    not one line per frame (500 lines), and the trace is whole."""
    try:
        import msgpack  # noqa: F401
    except ImportError:
        raise ft.Skip("python3-msgpack is not installed")
    peer = t.path("shm_peer.py")
    with open(peer, "w") as f:
        f.write(SHM_PEER)
    res = t.run([ft.PYTHON, peer, "500"], expect_rc=0, single_root=False)
    check("sent 500" in res.out, f"the peer did not finish\n  {res.describe()}")
    lines = [l for l in res.err.splitlines() if "implausible event buffer" in l]
    check(1 <= len(lines) <= 1 + ft_limit_each(), f"{len(lines)} warning lines about the "
          f"peer's frames, expected at most {1 + ft_limit_each()}:\n" + "\n".join(lines[:10]))
    more = [l for l in lines if "more not shown" in l]
    check(len(more) == 1 and f"{500 - len(lines) + 1} more not shown (from 1 process)" in more[0],
          f"no count of the warnings not shown: {lines}")


def ft_limit_each():
    return 3  # SAY_LIMIT_EACH in collector/say.h


def frame(mtype, fields):
    """One wire frame (include/forktrace/wire.h) of msgpack map fields."""
    import msgpack
    import struct
    payload = msgpack.packb(fields, use_bin_type=True)
    return b"FT" + bytes([1, mtype]) + struct.pack("<I", len(payload)) + payload


if __name__ == "__main__":
    ft.main()
