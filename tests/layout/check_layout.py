#!/usr/bin/python3
"""The folder boundaries of the source tree (docs/ARCHITECTURE.md).

  check_layout.py lint SRC_DIR
      Every quoted #include names a header by its name, never by a path
      that climbs out of its folder ("../io/x.h"): which headers a file
      may see is its build target's business. Files of collector/ outside
      collector/cli/ include no header of cli/, nor the headers that sit in
      combine/include/ only because several folders of combine/ share
      them (COMBINE_ONLY). No combine/ folder other
      than its own has a header named internal.h on a shared path. The
      ft_/FT_ prefix is the public API's (include/): combine/ and
      collector/ use such names, never make new ones.

  check_layout.py include HEADER EXPECT -- COMPILER ARGS...
      Compiles a file that includes HEADER with a target's include path
      (ARGS): EXPECT "ok" wants it to compile, "missing" wants the
      compiler to say HEADER is not found, so that a folder's private
      header cannot be reached from another folder's target.

  check_layout.py objects NM LOWER UPPER
      The one-way dependency between two sets of object files (each a
      colon-separated list; here collector/'s live run and collector/cli/):
      no object of LOWER leaves undefined a symbol that an object of
      UPPER defines. Checked on what the compiler made (nm), so that a
      call through a macro or an inline function counts too.
"""

import os
import re
import subprocess
import sys
import tempfile

from agent_layers import symbols

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
FT_NAME = re.compile(r'\b(?:ft|FT)_[A-Za-z0-9_]+')
# Headers of combine/include/ that only combine/'s folders (and their
# unit tests) use: the collector sees them, so the lint keeps it off.
COMBINE_ONLY = {"jsonr.h", "h5_module.h", "regfile.h", "gzblock.h"}
# Not names of the API: the build's version string, and include guards.
FT_NOT_API = re.compile(r'FT_VERSION_STRING$|FT_[A-Z0-9_]+_H$')
# Comments and string and character literals: names in them (an
# environment variable, a template's placeholder) are not C names.
NOT_CODE = re.compile(r'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)
SOURCE_DIRS = ("agent", "collector", "combine", "include", "tests", "scripts")


def sources(root):
    for top in SOURCE_DIRS:
        for d, subdirs, files in os.walk(os.path.join(root, top)):
            subdirs[:] = [s for s in subdirs if s not in ("corpus", "node_modules")]
            for f in files:
                if f.endswith((".c", ".h", ".cpp")):
                    yield os.path.join(d, f)


def public_names(root):
    names = set()
    for d, _, files in os.walk(os.path.join(root, "include")):
        for f in files:
            if f.endswith(".h"):
                with open(os.path.join(d, f), encoding="utf-8") as h:
                    names.update(FT_NAME.findall(h.read()))
    return names


def lint(root):
    bad = []
    public = public_names(root)
    cli = os.path.join(root, "collector", "cli")
    cli_headers = {f for f in os.listdir(cli) if f.endswith(".h")}
    for path in sources(root):
        rel = os.path.relpath(path, root)
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                text = f.read()
        except FileNotFoundError:
            continue  # a test's scratch file, gone since the walk saw it
        for name in INCLUDE.findall(text):
            if name.startswith("../") or "/../" in name or name.startswith("./"):
                bad.append(f"{rel}: #include \"{name}\": a relative path (a header is found "
                           f"through its target's include directories)")
            if (rel.startswith("collector/") and not rel.startswith("collector/cli/")
                    and os.path.basename(name) in cli_headers):
                bad.append(f"{rel}: #include \"{name}\": collector/ does not see collector/cli/")
            if rel.startswith("collector/") and name in COMBINE_ONLY:
                bad.append(f"{rel}: #include \"{name}\": a header of combine/'s own folders")
        if rel.startswith(("combine/", "collector/")):
            for name in sorted(set(FT_NAME.findall(NOT_CODE.sub(" ", text))) - public):
                if not FT_NOT_API.match(name):
                    bad.append(f"{rel}: {name}: ft_/FT_ names are include/'s (the public API); "
                               f"give it its module's prefix")
    if os.path.exists(os.path.join(root, "combine", "include", "internal.h")):
        bad.append("combine/include/internal.h: a folder's internal header is its own")
    for b in bad:
        print(b)
    return 1 if bad else 0


def include(header, expect, cmd):
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "probe.c")
        with open(src, "w") as f:
            f.write(f'#include "{header}"\n')
        r = subprocess.run(cmd + ["-fsyntax-only", src], capture_output=True, text=True)
    out = r.stdout + r.stderr
    if expect == "ok":
        if r.returncode != 0:
            print(f"\"{header}\" should compile with these include directories:\n{out}")
            return 1
        return 0
    if r.returncode == 0 or f"{header}: No such file" not in out and f"'{header}' file not found" not in out:
        print(f"\"{header}\" should not be found with these include directories "
              f"(exit {r.returncode}):\n{out}")
        return 1
    return 0


def objects(nm, lower, upper):
    lower = [o for o in lower.split(":") if o]
    upper = [o for o in upper.split(":") if o]
    if not lower or not upper:
        print("objects: an empty list of object files")
        return 2
    defined_by = {}
    for obj in upper:
        for name in symbols(nm, obj)[0]:
            defined_by[name] = os.path.basename(obj)
    bad = []
    for obj in lower:
        for name in sorted(symbols(nm, obj)[1] & defined_by.keys()):
            bad.append(f"{os.path.basename(obj)} uses {name}, defined by {defined_by[name]}")
    for b in bad:
        print(b)
    return 1 if bad else 0


def main(argv):
    if len(argv) == 3 and argv[1] == "lint":
        return lint(argv[2])
    if len(argv) > 5 and argv[1] == "include" and argv[4] == "--":
        return include(argv[2], argv[3], argv[5:])
    if len(argv) == 5 and argv[1] == "objects":
        return objects(argv[2], argv[3], argv[4])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
