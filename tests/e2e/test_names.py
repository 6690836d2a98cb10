#!/usr/bin/python3
"""End-to-end tests of process names (docs/TRACE_FORMAT.md "Names"): a tree
of scripts, `#!` ones and interpreters run by name, named after the script
with the interpreter beside it, in process_name, forktrace_process and the
image slices."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ftcheck as ft  # noqa: E402
from ftcheck import check, test  # noqa: E402

SCRIPTS = {
    "top.sh": "#!/bin/sh\n./tool.pl\nperl ./tool.pl\n./tool.py\n"
              f"{ft.PYTHON} -m ftmod\n./build.sh\nsh -c 'exit 0'\nexit 0\n",
    "tool.pl": "#!/usr/bin/perl -w\nexit 0;\n",
    "tool.py": f"#!{ft.PYTHON}\nprint('tool.py')\n",
    "ftmod.py": "print('ftmod')\n",
    "build.sh": "#!/bin/bash\nexit 0\n",
}


def write_scripts(d):
    for name, text in SCRIPTS.items():
        path = os.path.join(d, name)
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, 0o755)


@test
def test_names_scripts(t):
    """top.sh (a #! sh script) runs a #! perl script, the same script with
    perl by name, a #! python3 script, python3 -m a module, a #! bash
    script and sh -c: each named after its script, with its interpreter,
    the sh -c after sh alone."""
    res = t.run_compare(["./top.sh"], setup=write_scripts, expect_rc=0)
    check(res.out == "tool.py\nftmod\n", f"output {res.stdout!r}")
    tr = res.trace
    root = tr.root()
    py = os.path.basename(ft.PYTHON)
    want = [
        # argv as the kernel and the shell gave it: name, interpreter.
        (["/bin/sh", "./top.sh"], "top.sh", "sh"),
        (["/usr/bin/perl", "-w", "./tool.pl"], "tool.pl", "perl"),
        (["perl", "./tool.pl"], "tool.pl", "perl"),
        ([ft.PYTHON, "./tool.py"], "tool.py", py),
        ([ft.PYTHON, "-m", "ftmod"], "ftmod", py),
        (["/bin/bash", "./build.sh"], "build.sh", "bash"),
        (["sh", "-c", "exit 0"], "sh", None),
    ]
    for argv, name, interp in want:
        p = tr.one(argv=argv)
        check(p.name == name and p.interpreter == interp,
              f"{argv}: name {p.name!r} interpreter {p.interpreter!r}, expected {name!r} "
              f"{interp!r}")
        shown = name if interp is None else f"{name} ({interp})"
        check(p.meta["process_name"][0].get("name") == shown,
              f"{argv}: process_name {p.meta['process_name']}, expected {shown!r}")
        last = p.image_slices[-1] if p.image_slices else {}
        check(last.get("name") == shown, f"{argv}: last image slice {last}")
        if p is not root:
            ft.assert_parent(p, root, tr)
        ft.assert_exit(p, code=0, trace=tr)
    ft.assert_count(tr.all(), len(want), "processes", tr)


if __name__ == "__main__":
    ft.main()
