#!/usr/bin/python3
"""Adversarial end-to-end tests of the process table: what a traced
process of forktrace's uid can do to the shared file its short-lived
images write in.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ftcheck as ft  # noqa: E402
from ftcheck import check, test  # noqa: E402

# The table lies beside the socket (or is linked there); the agent takes
# FORKTRACE_SOCK out of environ, /proc/PID/environ still has it.
CUT = ('d=$(dirname "$(tr "\\0" "\\n" </proc/$$/environ | sed -n "s/^FORKTRACE_SOCK=//p")"); '
       '/bin/true; truncate -s 0 "$d/table" || exit 99; '
       'for i in 1 2 3; do /bin/true; done; exit 3')


@test
def table_cut_short(ctx):
    """A traced process cuts the table file to nothing: a read of a slot's
    page past the end is SIGBUS, which would end forktrace with the trace
    lost.
    It must write the trace with what came before, warn, and not say
    "0 lost". (The agents that write in the cut file die of SIGBUS
    themselves: docs/SECURITY.md.)"""
    res = ctx.forktrace(ctx.run_args(["/bin/sh", "-c", CUT]), timeout=30)
    check(os.path.exists(ctx.path("trace.json")),
          f"no trace: forktrace died (exit {res.rc})\n  {res.describe()}")
    check("cut the process table short" in res.err,
          f"no warning about the cut table\n  {res.describe()}")
    check(not res.summary_lines() and " lost and the rest of the process table" in res.err,
          f"the summary does not say what is missing\n  {res.describe()}")
    tr = ft.load_trace(ctx.path("trace.json"))
    names = [ft.basename(p.name) for p in tr.all()]
    # What the collector had read before the cut is a race; the shell
    # spoke before it ran truncate.
    check("sh" in names, f"the trace lacks the shell: {names}\n  {res.describe()}")


if __name__ == "__main__":
    ft.main()
