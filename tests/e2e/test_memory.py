#!/usr/bin/python3
"""End-to-end tests of the memory bound (docs/OUTPUT.md, "mem"): whatever
the number of events, `forktrace run --max-memory SIZE` peaks within SIZE
(or the 32 MiB floor) for every output format, its models keeping what
the 32 MiB reserve leaves of SIZE and spilling the rest, and `forktrace
combine` of spill files within 64 MiB, with every event written.

The program (tests/progs/ev_funcs.c, `named N LEN`) records about 41 MB of
event records in a fraction of a second: N regions with a name of LEN
bytes, each around a function call, inside one region "all" that stays
open across every chunk. Held in memory, the records alone would pass the
bound. The peak is wait4's ru_maxrss of forktrace: the most it and what it
reaped (the traced program, a few MiB) ever had resident. A sanitizer
build's shadow memory is no part of the product: there the peak is not
checked, the rest is.
"""

import gzip
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ftcheck as ft  # noqa: E402
from ftcheck import check, fail, prog, test  # noqa: E402

N, LEN = 40000, 1000
COMBINE_KIB = 64 * 1024
NAME = b"n" + b"x" * (LEN - 1)


def sanitized():
    with open(ft.forktrace_bin(), "rb") as f:
        data = f.read()
    return b"libasan" in data or b"libtsan" in data


# Runs argv[2:] and writes its peak RSS (KiB) to argv[1]. A process keeps
# the high-water mark of the one it was forked from across exec: started
# by the test, which holds the traces it read, forktrace would inherit
# that; from this small interpreter, at most its few MiB.
MEASURE = ("import resource, subprocess, sys\n"
           "rc = subprocess.call(sys.argv[2:])\n"
           "ru = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
           "open(sys.argv[1], 'w').write(f'{ru.ru_maxrss}\\n')\n"
           "sys.exit(rc)\n")


def measured(ctx, args, timeout=60):
    """Runs forktrace with args in ctx.dir; returns (Result, its peak RSS in
    KiB): the high-water mark of forktrace and of the children it reaped
    (wait4's ru_maxrss)."""
    rss_path = ctx.path(f"rss{len(ctx.results)}")
    argv = [ft.forktrace_bin()] + list(args)
    t0 = time.monotonic()
    try:
        p = subprocess.run([sys.executable, "-c", MEASURE, rss_path] + argv, cwd=ctx.dir,
                           stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout,
                           start_new_session=True)
    except subprocess.TimeoutExpired:
        ft.kill_leftovers(ctx.dir)
        fail(f"{' '.join(argv)} did not finish within {timeout} s")
    res = ft.Result(argv, p.returncode, p.stdout, p.stderr, time.monotonic() - t0, ctx.dir, None,
                    None)
    ctx.results.append(res)
    with open(rss_path) as f:
        return res, int(f.read())


def check_events(raw, what):
    """Every region and call of `named N LEN` is in the trace text raw,
    each long name whole (none cut, none from the bytes of another chunk),
    nothing left unfinished."""
    funcs = raw.count(b'"cat":"function"')
    regions = raw.count(b'"cat":"region"')
    named = raw.count(b'"name":"' + NAME + b'"')
    check(funcs == N + 1 and regions == N + 1 and named == N,
          f"{what}: {funcs} function slices (expected {N + 1}: c_leaf and main), {regions} "
          f"regions (expected {N + 1}), {named} named with the whole {LEN}-byte name "
          f"(expected {N})")
    check(b'"unfinished"' not in raw, f"{what}: a slice is marked unfinished")


def check_peak(rss_kib, bound_kib, what, res):
    print(f"{what}: peak RSS {rss_kib / 1024:.1f} MiB (bound {bound_kib / 1024:.0f} MiB)")
    if sanitized():
        return
    check(rss_kib <= bound_kib,
          f"{what}: peak RSS {rss_kib} KiB, above the bound of {bound_kib} KiB\n"
          f"  {res.describe()}")


def run_bounded(ctx, out, mib=32):
    """run --max-memory {mib}M: of it, the models get what the collector's
    32 MiB reserve leaves (none at 32M: every record spills; 16 MiB at
    48M: the rest of the 41 MB spills)."""
    res, rss = measured(ctx, ["run", "--max-memory", f"{mib}M", "-o", out, "--",
                              prog("ev_funcs"), "named", str(N), str(LEN)])
    check(res.rc == 0, f"forktrace run exited {res.rc}\n  {res.describe()}")
    check_peak(rss, mib * 1024, f"run -o {out}", res)
    spills = res.spill_lines()
    want = 41 * 1000 * 1000 - (mib - 32) * 1024 * 1024 - 2 * 1000 * 1000
    check(len(spills) == 1 and int(spills[0].group(2)) > want,
          f"forktrace did not say it spilled {want} bytes of the records or more\n"
          f"  {res.describe()}")
    lines = res.summary_lines()
    check(len(lines) == 1 and lines[0].group(3) == "0",
          f"no summary line, or events lost\n  {res.describe()}")
    return res, int(lines[0].group(2))


def check_json_run(ctx, out, mib=32):
    res, events = run_bounded(ctx, out, mib)
    ctx.load(res, out=out, expect_rc=0)
    with open(ctx.path(out), "rb") as f:
        raw = f.read()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    check_events(raw, out)
    check(events == len(res.trace.events),
          f"{out}: the summary says {events} events, the trace has {len(res.trace.events)}")


@test
def memory_run_json(ctx):
    """run -o t.json with --max-memory 32M: within 32 MiB, every event."""
    check_json_run(ctx, "t.json")


@test
def memory_run_gzip(ctx):
    """run -o t.json.gz with --max-memory 48M: within 48 MiB, every event;
    16 MiB of the records in memory, the rest spilled."""
    check_json_run(ctx, "t.json.gz", 48)


@test
def memory_run_h5(ctx):
    """run -o t.h5 with --max-memory 32M: within 32 MiB, every event (read
    back through combine's HDF5 reader)."""
    run_bounded(ctx, "t.h5")
    res = ctx.forktrace(["combine", "-q", "t.h5", "-o", "back.json"])
    check(res.rc == 0, f"combine of the HDF5 trace failed\n  {res.describe()}")
    with open(ctx.path("back.json"), "rb") as f:
        check_events(f.read(), "t.h5")


@test
def memory_combine_spill(ctx):
    """combine of an agent's spill file of 41 MB (the program ran without
    a collector): within 64 MiB, every event. combine held the file's
    pages and every record in memory: 100 MiB."""
    spill = ctx.subdir("spill")
    os.chmod(spill, 0o700)
    agent = os.path.join(os.path.dirname(ft.forktrace_bin()), "libforktrace-agent.so")
    env = dict(os.environ, LD_PRELOAD=agent, FORKTRACE_SPILL=spill)
    env.pop("FORKTRACE_SOCK", None)
    r = subprocess.run([prog("ev_funcs"), "named", str(N), str(LEN)], env=env,
                       stdin=subprocess.DEVNULL, capture_output=True, timeout=60)
    check(r.returncode == 0, f"ev_funcs exited {r.returncode}: {r.stderr!r}")
    size = sum(os.path.getsize(os.path.join(spill, f)) for f in os.listdir(spill))
    check(size > 40 * 1000 * 1000, f"the spill files hold {size} bytes")
    for out in ("c.json", "c.json.gz"):
        res, rss = measured(ctx, ["combine", "-q", spill, "-o", out])
        check(res.rc == 0, f"combine exited {res.rc}\n  {res.describe()}")
        check_peak(rss, COMBINE_KIB, f"combine -o {out}", res)
        with open(ctx.path(out), "rb") as f:
            raw = f.read()
        check_events(gzip.decompress(raw) if out.endswith(".gz") else raw, f"combine -o {out}")


if __name__ == "__main__":
    ft.main()
