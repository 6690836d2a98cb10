#!/usr/bin/env python3
"""forktrace against signals and hostile limits: signals sent to it, to its
process group and from a terminal, once COMMAND runs and once only daemons
are left; option values that are not numbers; peers that hold memory with
partial frames; too few file descriptors."""
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ftcheck as ft  # noqa: E402
from ftcheck import check, test  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


@test
def test_numeric_options(t):
    """Every numeric option takes the whole value or refuses it with a
    usage error before COMMAND runs: no NaN, sign, blank, hexadecimal,
    trailing junk or overflow slips through as some other number. inf and
    huge --wait-timeout values wait (they used to time out at once)."""
    marker = t.path("ran")
    cmd = ["sh", "-c", f": > {marker}"]
    bad = {
        "--wait-timeout": ["nan", "NaN", "-1", "-0", " 5", "5x", "0x10", "", ".", "1e", "+1",
                           "5 ", "infx", "1,5"],
        "--max-memory": ["-1", "0", "5x", " 5", "+5", "0x10", "99999999999999999999999",
                         "17179869184G", "1.5G", "M", ""],
        "--level": [" 5", "+5", "0", "10", "-1", "99999999999999999999", "5x", ""],
    }
    for opt, values in bad.items():
        for v in values:
            res = t.forktrace(["run", "-q", "-o", "t.json", opt, v, "--"] + cmd)
            check(res.rc == 2, f"{opt} {v!r}: forktrace exited {res.rc}, expected the usage "
                  f"error 2\n  {res.describe()}")
            check(opt in res.err and repr(v)[1:-1] in res.err,
                  f"{opt} {v!r}: the error does not name the option and the value\n"
                  f"  {res.describe()}")
            check(not os.path.exists(marker), f"{opt} {v!r}: COMMAND ran\n  {res.describe()}")
            check(not os.path.exists(t.path("t.json")), f"{opt} {v!r}: a trace was written")
    for v in ("0", "+3", " 4", "10", "x"):
        res = t.forktrace(["combine", "--level", v, "-o", "c.json", "none.json"])
        check(res.rc == 2 and "--level" in res.err,
              f"combine --level {v!r}: exited {res.rc}\n  {res.describe()}")
    for v in ("512M", "1k", "64KB", "1T", "18446744073709551615"):
        res = t.run(["true"], opts=["--max-memory", v], out="m.json", quiet=True, expect_rc=0)
    # A background child outlives the shell by 0.6 s: a timeout that is
    # really "wait" lets it end; one taken as 0 cuts it off as running.
    for v in ("inf", "INFINITY", "1e300", "99999999999999999999999999", "30"):
        res = t.run(["sh", "-c", "sleep 0.6 & exit 0"], opts=["--wait-timeout", v],
                    out="w.json", expect_rc=0, quiet=True)
        sl = res.trace.one(name="sleep")
        ft.assert_exit(sl, code=0, trace=res.trace)
        check(res.elapsed >= 0.5, f"--wait-timeout {v}: returned after {res.elapsed:.2f} s")


if __name__ == "__main__":
    ft.main()
