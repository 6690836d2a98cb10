#!/usr/bin/python3
"""forktrace's outputs read by readers nobody here wrote: Python's json,
gzip and zlib, gzip(1) and h5py, on the trace of a function-heavy program
(tests/progs/ev_funcs: each of c_leaf, lib_add, plugin_mul, cpp_poke and
evns::Widget::poke(int) called N times, 5 N + 1 function slices, some
10 MB of JSON: many of the writers' blocks).

readers_json   `run -o t.json`: json.load finds exactly the calls made,
               each inside main.
readers_gzip   `run -o t.json.gz`: gzip -t accepts it, it is one gzip
               member (readers such as pako stop after the first), and
               gzip.open + json.load find the same calls; combine of it to
               .json and to .json.gz (levels 1, default, 9): gzip -dc of
               each .json.gz is the .json's bytes exactly.
readers_h5     `run -o t.json`, combined to .h5: h5py's rows of every
               function slice (name, thread, start and duration in ns) are
               the JSON's, one for one (tests/e2e/test_h5.py checks the
               layout and a run's .h5 against its reader).
readers_threads  the same spill file combined with FORKTRACE_THREADS=1
               and with the default: .json and .json.gz byte for byte the
               same, .h5 the same datasets and attributes; its JSON holds
               exactly the calls made, each inside main (the records
               before the spill's second clock pair are placed on the
               line between its first two, not all at the first).
"""

import collections
import decimal
import gzip
import json
import os
import subprocess
import sys
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ftcheck as ft  # noqa: E402
from ftcheck import Skip, check, prog, test  # noqa: E402

N = 20000
FUNCS = ("c_leaf", "lib_add", "plugin_mul", "cpp_poke", "evns::Widget::poke(int)")


def function_slices(doc):
    return [e for e in doc["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "function"]


def check_calls(doc, what):
    """Exactly the calls ev_funcs calls N made, each inside main."""
    fs = function_slices(doc)
    count = collections.Counter(e["name"] for e in fs)
    want = dict({f: N for f in FUNCS}, main=1)
    check(dict(count) == want, f"{what}: function slices {dict(count)}, expected {want}")
    main = [e for e in fs if e["name"] == "main"][0]
    outside = [e for e in fs if e["name"] != "main" and not (
        main["ts"] <= e["ts"] and e["ts"] + e["dur"] <= main["ts"] + main["dur"])]
    check(not outside, f"{what}: {len(outside)} calls outside main, first {outside[:1]}")


def first_difference(a, b):
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def run_funcs(t, out):
    res = t.forktrace(t.run_args([prog("ev_funcs"), "calls", str(N)], out=out, quiet=True))
    check(res.rc == 0, f"forktrace run -o {out} failed\n  {res.describe()}")
    return t.path(out)


def spill_funcs(t):
    """The agent's spill file of one ev_funcs run (no forktrace): combine
    decodes its records as run decodes a live process's."""
    spill = t.subdir("spill")
    os.chmod(spill, 0o700)
    agent = os.path.join(os.path.dirname(ft.forktrace_bin()), "libforktrace-agent.so")
    env = dict(os.environ, LD_PRELOAD=agent, FORKTRACE_SPILL=spill)
    env.pop("FORKTRACE_SOCK", None)
    r = subprocess.run([prog("ev_funcs"), "calls", str(N)], env=env, cwd=t.dir,
                       stdin=subprocess.DEVNULL, capture_output=True, timeout=60)
    check(r.returncode == 0, f"ev_funcs exited {r.returncode}: {r.stderr!r}")
    check(any(f.endswith(".ftspill") for f in os.listdir(spill)), f"nothing spilled in {spill}")
    return spill


def combine(t, inp, out, opts=(), env=None):
    res = t.forktrace(["combine", "-q", inp, "-o", out] + list(opts), env=env, timeout=90)
    check(res.rc == 0, f"combine {inp} -o {out} failed\n  {res.describe()}")
    return t.path(out)


def h5py_or_skip():
    try:
        import h5py
        import numpy
    except ImportError as e:
        raise Skip(f"python3-h5py is not installed ({e}): scripts/setup-deps installs it")
    return h5py, numpy


@test
def readers_json(t):
    path = run_funcs(t, "t.json")
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    check_calls(doc, "t.json")


@test
def readers_gzip(t):
    path = run_funcs(t, "t.json.gz")
    r = subprocess.run(["gzip", "-t", path], capture_output=True, timeout=60)
    check(r.returncode == 0, f"gzip -t {path}: exit {r.returncode}: {r.stderr!r}")
    raw = open(path, "rb").read()
    d = zlib.decompressobj(wbits=31)
    first = d.decompress(raw) + d.flush()
    check(d.eof and d.unused_data == b"",
          f"not one gzip member: {len(d.unused_data)} bytes after the first member's "
          f"{len(raw) - len(d.unused_data)}")
    with gzip.open(path, "rb") as f:
        text = f.read()
    check(text == first, "zlib's first member and gzip.open read different bytes")
    check_calls(json.loads(text), "t.json.gz")

    plain = open(combine(t, path, "c.json"), "rb").read()
    check(len(plain) > 4 << 20, f"the JSON is {len(plain)} bytes: too small to span blocks")
    for name, opts in (("c1.json.gz", ["--level", "1"]), ("c6.json.gz", []),
                       ("c9.json.gz", ["--level", "9"])):
        gz = combine(t, path, name, opts)
        r = subprocess.run(["gzip", "-dc", gz], capture_output=True, timeout=60)
        check(r.returncode == 0, f"gzip -dc {name}: exit {r.returncode}: {r.stderr!r}")
        if r.stdout != plain:
            ft.fail(f"{name} decompresses to {len(r.stdout)} bytes that are not c.json's "
                    f"{len(plain)} (first difference at {first_difference(r.stdout, plain)})")


@test
def readers_h5(t):
    h5py, np = h5py_or_skip()
    jpath = run_funcs(t, "t.json")
    hpath = combine(t, jpath, "c.h5")
    # Decimal: the JSON's microseconds with three decimals are whole ns.
    with open(jpath, encoding="utf-8") as f:
        doc = json.load(f, parse_float=decimal.Decimal)
    check_calls(doc, "t.json")
    want = sorted((e["name"], e["tid"], int(e["ts"] * 1000), int(e["dur"] * 1000))
                  for e in function_slices(doc))
    got = []
    with h5py.File(hpath, "r") as f:
        meta = f["metadata"]
        strings = meta["strings"].asstr()[:]
        for pid in meta["events"]:
            g = meta["events"][pid]
            cols = {k: g[k][:] for k in ("ts_ns", "dur_ns", "name_id", "cat_id", "tid", "ph")}
            fn = (cols["ph"] == ord("X")) & (np.array([strings[c] for c in cols["cat_id"]])
                                             == "function")
            for i in np.nonzero(fn)[0]:
                got.append((strings[cols["name_id"][i]], int(cols["tid"][i]),
                            int(cols["ts_ns"][i]), int(cols["dur_ns"][i])))
    got.sort()
    check(len(got) == len(want), f"h5py reads {len(got)} function slices, the JSON has {len(want)}")
    diff = [(g, w) for g, w in zip(got, want) if g != w]
    check(not diff, f"{len(diff)} function slices differ (h5, json), first {diff[:3]}")


def h5_contents(h5py, path):
    """Every dataset's values and every attribute of an .h5, by path."""
    out = {}

    def attrs(name, obj):
        return {k: repr(v) for k, v in obj.attrs.items()}

    with h5py.File(path, "r") as f:
        out["/"] = attrs("/", f)

        def visit(name, obj):
            if isinstance(obj, h5py.Dataset):
                v = obj[()]
                out[name] = (attrs(name, obj), repr(v.tolist()) if obj.dtype.hasobject
                             else v.tobytes())
            else:
                out[name] = attrs(name, obj)
        f.visititems(visit)
    return out


@test
def readers_threads(t):
    h5py, _ = h5py_or_skip()
    spill = spill_funcs(t)
    one = dict(os.environ, FORKTRACE_THREADS="1")
    dflt = dict(os.environ)
    dflt.pop("FORKTRACE_THREADS", None)
    for ext in ("json", "json.gz"):
        a = open(combine(t, spill, "one." + ext, env=one), "rb").read()
        b = open(combine(t, spill, "default." + ext, env=dflt), "rb").read()
        check(len(a) > 1 << 18, f".{ext}: {len(a)} bytes: too small to span blocks")
        if ext == "json":
            check_calls(json.loads(a), "spill combined")
        if a != b:
            ft.fail(f".{ext}: FORKTRACE_THREADS=1 wrote {len(a)} bytes, the default {len(b)}, "
                    f"first difference at {first_difference(a, b)}")
    a = h5_contents(h5py, combine(t, spill, "one.h5", env=one))
    b = h5_contents(h5py, combine(t, spill, "default.h5", env=dflt))
    check(sorted(a) == sorted(b), f".h5: objects differ: {sorted(set(a) ^ set(b))}")
    diff = [k for k in a if a[k] != b[k]]
    check(not diff, f".h5: FORKTRACE_THREADS=1 and the default differ in {diff}")


if __name__ == "__main__":
    ft.main()
