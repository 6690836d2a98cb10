#!/usr/bin/python3
"""The agent's files form layers (agent/CMakeLists.txt, agent_layers): a file
calls into its own layer and the layers below it, never above, and the calls
between files form no cycle. Checked on what the compiler made of them: the
symbols each object file of the agent leaves undefined (nm) against the
symbols the others define, so a call the preprocessor hides, or one through
an inline function of internal.h, counts too. Also checks that internal.h
declares each function in the section of the layer that defines it.

usage: agent_layers.py --nm NM --layers 'NAME: FILE...|...' --header
       agent/internal.h OBJECT...
Prints the layers and each file's calls into other files; exits 1 with
the offending calls when a rule is broken.
"""

import argparse
import os
import re
import subprocess
import sys


def parse_layers(spec):
    layers = []
    for part in spec.split("|"):
        name, _, files = part.partition(":")
        layers.append((name.strip(), files.split()))
    return layers


def symbols(nm, obj):
    """(defined, undefined) global symbols of an object file."""
    out = subprocess.run([nm, "-P", obj], check=True, stdout=subprocess.PIPE,
                         universal_newlines=True).stdout
    defined, undefined = set(), set()
    for line in out.splitlines():
        f = line.split()
        if len(f) < 2:
            continue
        name, kind = f[0], f[1]
        if kind in ("U", "w", "v"):
            undefined.add(name)
        elif kind.isupper():
            defined.add(name)
    return defined, undefined


def cycles(graph):
    """Strongly connected components of more than one file (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


DECL = re.compile(r"^(?:extern\s+)?[A-Za-z_][\w\s\*]*?\b([A-Za-z_]\w*)\s*[\(\[;]")
SECTION = re.compile(r"^/\* =+ (\w+):")
ATTR = re.compile(r"__attribute__\(\((?:[^()]|\([^()]*\))*\)\)")


def header_sections(path):
    """{name declared: section} for the sections of internal.h."""
    where, section = {}, None
    with open(path) as f:
        for line in f:
            m = SECTION.match(line)
            if m:
                section = m.group(1)
                continue
            if section is None or line[:1] in (" ", "\t", "#", "/", "}", "\n") or \
                    line.startswith("static ") or line.startswith("typedef "):
                continue
            m = DECL.match(ATTR.sub("", line))
            if m:
                where[m.group(1)] = section
    return where


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nm", default="nm")
    ap.add_argument("--layers", required=True)
    ap.add_argument("--header")
    ap.add_argument("objects", nargs="+")
    args = ap.parse_args()

    layers = parse_layers(args.layers)
    rank = {}
    for i, (name, files) in enumerate(layers):
        for f in files:
            rank[f] = (i, name)
    errors = []

    defs, undefs, owner = {}, {}, {}
    for obj in args.objects:
        src = re.sub(r"\.o(bj)?$", "", os.path.basename(obj))
        if src not in rank:
            errors.append(f"{src} is in no layer of agent_layers")
            continue
        defs[src], undefs[src] = symbols(args.nm, obj)
        for s in defs[src]:
            owner[s] = src
    for f in rank:
        if f not in defs and not any(e.startswith(f + " ") for e in errors):
            errors.append(f"{f} is in agent_layers but no object file of it was given")

    graph = {f: set() for f in defs}
    calls = {}
    for f, und in undefs.items():
        for s in sorted(und):
            g = owner.get(s)
            if g and g != f:
                graph[f].add(g)
                calls.setdefault((f, g), []).append(s)

    print("agent layers, lowest first (a file calls into its own layer and those below):")
    for i, (name, files) in enumerate(layers):
        print(f"  {i} {name}: {' '.join(files)}")
    print("calls between files:")
    for i, (name, files) in enumerate(layers):
        for f in files:
            for g in sorted(graph.get(f, ()), key=lambda g: (rank[g][0], g)):
                print(f"  {f} -> {g}: {' '.join(calls[(f, g)])}")

    for (f, g), names in sorted(calls.items()):
        if rank[g][0] > rank[f][0]:
            errors.append(f"{f} (layer {rank[f][1]}) calls up into {g} (layer {rank[g][1]}): "
                          + " ".join(names))
    for comp in cycles(graph):
        errors.append("the calls of these files form a cycle: " + " ".join(comp))

    if args.header:
        for name, section in sorted(header_sections(args.header).items()):
            f = owner.get(name)
            if f and rank[f][1] != section:
                errors.append(f"internal.h declares {name} in section {section}, but {f} "
                              f"defines it (layer {rank[f][1]})")

    for e in errors:
        print("error: " + e)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
