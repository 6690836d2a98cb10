#!/usr/bin/python3
"""Hostile and unusual inputs of forktrace's readers and human output:
paths in MODULE frames that are not regular files, inputs that are FIFOs,
pipes, stdin or devices, control bytes in names, duplicate keys, floods
of warnings. Each test names the defect it guards against."""

import os
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
    block on the FIFO (before: forktrace hung until SIGKILL) nor open the
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


def frame(mtype, fields):
    """One wire frame (include/forktrace/wire.h) of msgpack map fields."""
    import msgpack
    import struct
    payload = msgpack.packb(fields, use_bin_type=True)
    return b"FT" + bytes([1, mtype]) + struct.pack("<I", len(payload)) + payload


if __name__ == "__main__":
    ft.main()
