#!/usr/bin/env python3
"""gzblock's member read by readers nobody here wrote: test_gzblock writes
a gzip member of blocks compressed apart (and the bytes it holds); gzip -t
accepts it, gzip -dc and Python's gzip give those bytes back.

    check_gzblock.py TEST_GZBLOCK DIR
"""
import gzip
import os
import subprocess
import sys


def main():
    test, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, "gzblock.json.gz")
    subprocess.run([test, "write", path], check=True)
    with open(path + ".src", "rb") as f:
        want = f.read()
    subprocess.run(["gzip", "-t", path], check=True)
    got = subprocess.run(["gzip", "-dc", path], check=True, stdout=subprocess.PIPE).stdout
    if got != want:
        sys.exit("gzip -dc: %d bytes, not the %d written" % (len(got), len(want)))
    with gzip.open(path, "rb") as f:
        got = f.read()
    if got != want:
        sys.exit("python gzip: %d bytes, not the %d written" % (len(got), len(want)))
    print("gzblock readers: gzip -t, gzip -dc and Python's gzip read %d bytes" % len(want))


main()
