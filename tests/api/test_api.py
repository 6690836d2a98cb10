#!/usr/bin/python3
"""Tests of the public instrumentation API (include/forktrace.h) and of the
installed package (forktrace.pc, find_package(forktrace), the installed
forktrace finding its agent). ctest runs `python3 test_api.py NAME`.

The programs are compiled here, the way a user of the header compiles
them: strict flags, no project defines, nothing linked but libc (and the
C++ runtime for the C++ half). Environment (tests/api/CMakeLists.txt):
  FT_API_SRC       this directory
  FT_INCLUDE       the source tree's include/
  FT_API_CC        "CC:CXX" of this build; FT_API_EXTRA_CC another pair
                   (clang), or empty
  FT_API_SANITIZE  the sanitizer flags of an FT_SANITIZE build, or empty
  FT_BUILD_DIR     the build tree (cmake --install's input)
  FT_CMAKE         cmake
  FT_BIN, FT_AGENT the build tree's forktrace and agent
"""

import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))
import ftcheck as ft  # noqa: E402
from ftcheck import check, test  # noqa: E402

SRC = os.environ.get("FT_API_SRC") or os.path.dirname(os.path.abspath(__file__))
INCLUDE = os.environ.get("FT_INCLUDE") or os.path.join(SRC, "..", "..", "include")

C_WARN = ["-Wall", "-Wextra", "-Werror", "-pedantic", "-Wshadow", "-Wconversion",
          "-Wsign-conversion", "-Wcast-qual", "-Wundef", "-Wstrict-prototypes",
          "-Wmissing-prototypes", "-Wold-style-definition", "-Wredundant-decls"]
CXX_WARN = ["-Wall", "-Wextra", "-Werror", "-pedantic", "-Wshadow", "-Wconversion",
            "-Wsign-conversion", "-Wcast-qual", "-Wundef", "-Wold-style-cast",
            "-Wzero-as-null-pointer-constant", "-Wnon-virtual-dtor", "-Wredundant-decls"]

# What use_all (with its C++ half) makes the agent see, in order: the log
# lines of fake_agent.c, counters as (name, value).
EXPECTED_C = [
    "thread_name main-thread",
    "region_begin outer",
    "instant checkpoint",
    ("queue_depth", 42.0),
    ("ratio", -0.125),
    "region_begin scoped_c",
    "region_begin scoped_c_inner",
    "instant inside_scoped_c",
    "region_end",  # scoped_c_inner, at the end of the block
    "region_end",  # scoped_c
    "instant after_scoped_c",
    "region_begin same_line_a", "region_begin same_line_b", "region_end", "region_end",
    "instant stack_7",
    "region_begin depth", "region_begin depth", "region_begin depth",
    "region_end", "region_end", "region_end",  # one per return
    "region_begin loop", "instant loop_body", "region_end",
    "region_begin loop", "region_end",  # continue leaves the block
    "region_begin loop", "instant loop_body", "region_end",
    "region_end",  # outer
    "instant errno_kept",
    ("errno_kept", 1.0),
]
EXPECTED_CXX = [
    "region_begin scoped_cxx",
    "region_begin raii_cxx",
    "instant inside_scoped_cxx",
    "region_end",  # ft::region, declared last, ends first
    "region_end",  # FT_REGION
    "instant after_scoped_cxx",
    "region_begin cxx_throwing",
    "region_end",  # the exception left the scope
    "instant after_throw",
    ("cxx_counter", 1e300),
]
EXPECTED = EXPECTED_C + EXPECTED_CXX
# sizeof(struct ft__api) and offsetof(struct ft__api, thread_name) on LP64.
API_SIZE = 48
THREAD_NAME_OFFSET = 40


def compilers():
    """[(cc, cxx)]: this build's pair first, then the extra one (clang)."""
    pairs = []
    for var in ("FT_API_CC", "FT_API_EXTRA_CC"):
        v = os.environ.get(var, "")
        if v:
            cc, cxx = v.split(":")
            if (cc, cxx) not in pairs:
                pairs.append((cc, cxx))
    if not pairs:
        pairs.append(("cc", "c++"))
    return pairs


def sanitize_flags():
    return os.environ.get("FT_API_SANITIZE", "").split()


def run(argv, cwd=None, env=None, timeout=120):
    """Runs argv; returns (rc, stdout, stderr) as text."""
    p = subprocess.run(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
    return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")


def must(argv, what, cwd=None, env=None, timeout=120):
    rc, out, err = run(argv, cwd=cwd, env=env, timeout=timeout)
    check(rc == 0, f"{what} failed (exit {rc})\n  command: {' '.join(argv)}\n"
          f"  stdout: {out[-3000:]}\n  stderr: {err[-3000:]}")
    return out


def clean_env(**extra):
    """The environment without any agent or forktrace setting in it."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("LD_PRELOAD", "FORKTRACE_AGENT", "FORKTRACE_SOCK", "FORKTRACE_SPILL",
                        "FT_FAKE_LOG", "FT_FAKE_VERSION", "FT_FAKE_SIZE", "PKG_CONFIG_PATH",
                        "CMAKE_PREFIX_PATH")}
    env.update(extra)
    return env


def build_use_all(t, cc, cxx, name, defines=(), cxx_half=True, flags=()):
    """Builds use_all.c (and use_all_cxx.cpp) into DIR/name with strict
    flags and no library; returns the executable's path."""
    d = t.subdir("obj-" + name)
    exe = t.path(name)
    defs = ["-D" + x for x in defines]
    common = ["-I" + INCLUDE, "-O2", "-g"] + list(flags) + sanitize_flags()
    objs = [os.path.join(d, "use_all.o")]
    must([cc, "-std=c99"] + C_WARN + common + defs + (["-DFT_TEST_CXX"] if cxx_half else []) +
         ["-c", os.path.join(SRC, "use_all.c"), "-o", objs[0]], f"compiling use_all.c ({name})")
    if cxx_half:
        objs.append(os.path.join(d, "use_all_cxx.o"))
        must([cxx, "-std=c++11"] + CXX_WARN + common + defs +
             ["-c", os.path.join(SRC, "use_all_cxx.cpp"), "-o", objs[1]],
             f"compiling use_all_cxx.cpp ({name})")
    # No -ldl, no -lforktrace: the header needs nothing at link time.
    must([cxx if cxx_half else cc] + sanitize_flags() + objs + ["-o", exe],
         f"linking {name} with no extra library")
    return exe


def run_prog(exe, env, what):
    rc, out, err = run([exe], env=env, timeout=60)
    check(rc == 0, f"{what}: {exe} exited {rc}\n  stdout: {out[-2000:]!r}\n  stderr: {err[-3000:]!r}")
    return out, err


# --------------------------------------------------------------------------
# The header alone


def header_variants(t, lang):
    """Compiles the header (and use_all) under every standard and warning
    set a user may have, with each compiler; -Werror throughout."""
    empty = t.path("empty." + ("c" if lang == "c" else "cpp"))
    with open(empty, "w") as f:
        # Included and unused: no unused-function or unused-variable warning.
        f.write("#include <forktrace.h>\nint main(void) { return 0; }\n")
    abi_only = t.path("abi_only." + ("c" if lang == "c" else "cpp"))
    with open(abi_only, "w") as f:
        # What the agent includes: the layout, nothing that runs.
        f.write("#define FT__ABI_ONLY\n#include <forktrace.h>\n"
                "int main(void) { return sizeof(struct ft__api) != %d; }\n" % API_SIZE)
    src = os.path.join(SRC, "use_all.c" if lang == "c" else "use_all_cxx.cpp")
    stds = ("c99", "c11", "gnu99") if lang == "c" else ("c++11", "c++17", "gnu++11")
    warn = C_WARN if lang == "c" else CXX_WARN
    count = 0
    for cc, cxx in compilers():
        comp = cc if lang == "c" else cxx
        for std in stds:
            for extra in ([], ["-D_GNU_SOURCE"], ["-O2"]):
                for f in (src, empty, abi_only):
                    must([comp, "-std=" + std] + warn + extra +
                         ["-I" + INCLUDE, "-fsyntax-only", f],
                         f"{os.path.basename(comp)} -std={std} {' '.join(extra)} "
                         f"on {os.path.basename(f)}")
                    count += 1
        # The ABI-only build defines nothing that runs: no constructor.
        exe = t.path(f"abi_only_{os.path.basename(comp)}")
        must([comp] + warn + ["-I" + INCLUDE, abi_only, "-o", exe], "linking abi_only")
        rc, out, err = run([exe])
        check(rc == 0, f"sizeof(struct ft__api) is not {API_SIZE} with {comp}")
        syms = must(["nm", exe], "nm")
        check("ft__api_prime" not in syms and "dlsym" not in syms,
              f"FT__ABI_ONLY still compiles the agent lookup in:\n{syms}")
    print(f"{count} compilations clean")


@test
def test_header_c(t):
    header_variants(t, "c")


@test
def test_header_cxx(t):
    header_variants(t, "cxx")


@test
def test_noop(t):
    """Without the agent, a program using every call links with nothing
    but libc, runs, and prints what it prints with the calls removed."""
    env = clean_env()
    for cc, cxx in compilers():
        tag = os.path.basename(cc)
        for cxx_half in (False, True):
            kind = f"{tag}-{'mixed' if cxx_half else 'c'}"
            with_calls = build_use_all(t, cc, cxx, f"calls-{kind}", cxx_half=cxx_half)
            without = build_use_all(t, cc, cxx, f"nocalls-{kind}", defines=["FT_TEST_NO_CALLS"],
                                    cxx_half=cxx_half)
            out1, err1 = run_prog(with_calls, env, "with the calls, no agent")
            out2, err2 = run_prog(without, env, "with the calls removed")
            check(out1 == out2, f"{kind}: stdout differs without the agent:\n"
                  f"  with calls    {out1!r}\n  calls removed {out2!r}")
            check(err1 == err2 == "", f"{kind}: stderr is not empty: {err1!r} / {err2!r}")
            check("errno kept" in out1 and "done" in out1, f"{kind}: unexpected output {out1!r}")
            if cxx_half:
                check("cxx 1" in out1, f"{kind}: the C++ half did not run: {out1!r}")
            if not sanitize_flags():
                needed = must(["readelf", "-d", with_calls], "readelf")
                libs = re.findall(r"\(NEEDED\).*\[(.+?)\]", needed)
                allowed = {"libc.so.6", "libstdc++.so.6", "libm.so.6", "libgcc_s.so.1"}
                check(set(libs) <= allowed and "libc.so.6" in libs,
                      f"{kind}: needs {libs}, more than libc and the C++ runtime")


# --------------------------------------------------------------------------
# The header against a stand-in agent


def parse_log(path):
    """(gets, events) from a fake agent log: gets is the list of versions
    asked for; events the other lines, counters as (name, value)."""
    gets, events = [], []
    if not os.path.exists(path):
        return gets, events
    with open(path) as f:
        for line in f.read().splitlines():
            if line.startswith("get "):
                gets.append(int(line.split()[1]))
            elif line.startswith("counter "):
                _, name, value = line.split(" ")
                events.append((name, float.fromhex(value)))
            else:
                events.append(line)
    return gets, events


def diff_events(got, want):
    for i, (g, w) in enumerate(zip(got, want)):
        if g != w:
            return f"first difference at #{i}: got {g!r}, expected {w!r}"
    return f"got {len(got)} events, expected {len(want)}"


@test
def test_fake_agent(t):
    """Every call reaches an agent serving the ABI, with its arguments and in
    order; FT_REGION ends at scope exit in C and C++; a table too old, too
    small or refused is handled."""
    for cc, cxx in compilers():
        tag = os.path.basename(cc)
        agent = t.path(f"fake_agent_{tag}.so")
        must([cc, "-std=c11", "-shared", "-fPIC", "-fvisibility=hidden", "-O2"] + C_WARN +
             ["-I" + INCLUDE, os.path.join(SRC, "fake_agent.c"), "-o", agent],
             "building the fake agent")
        check("ft__api_get" in must(["nm", "-D", "--defined-only", agent], "nm"),
              "the fake agent does not export ft__api_get")
        prog = build_use_all(t, cc, cxx, f"prog-{tag}")
        newer = build_use_all(t, cc, cxx, f"prog-v2-{tag}", defines=["FT__API_REQUEST=2"])
        ref_out, _ = run_prog(prog, clean_env(), "without the agent")

        def under_fake(exe, name, **knobs):
            log = t.path(f"{name}-{tag}.log")
            env = clean_env(LD_PRELOAD=agent, FT_FAKE_LOG=log,
                            **{k: str(v) for k, v in knobs.items()})
            if sanitize_flags():
                # ASan wants its runtime first; the fake only logs.
                env["ASAN_OPTIONS"] = (env.get("ASAN_OPTIONS", "") +
                                       ":verify_asan_link_order=0").lstrip(":")
            out, err = run_prog(exe, env, f"{name} under the fake agent")
            check(out == ref_out, f"{name}: stdout differs under the fake agent:\n"
                  f"  agent    {out!r}\n  no agent {ref_out!r}")
            return parse_log(log)

        # Each translation unit (C and C++) asks once, for version 1.
        gets, events = under_fake(prog, "v1")
        check(gets == [1, 1], f"ft__api_get calls {gets}, expected one per translation "
              f"unit: [1, 1]")
        check(events == EXPECTED, f"the fake agent saw the wrong calls: "
              f"{diff_events(events, EXPECTED)}\n  got {events}")

        # A table without thread_name (a smaller size): that call is a no-op.
        gets, events = under_fake(prog, "short", FT_FAKE_SIZE=THREAD_NAME_OFFSET)
        want = [e for e in EXPECTED if not str(e).startswith("thread_name")]
        check(events == want, f"with size {THREAD_NAME_OFFSET} (no thread_name): "
              f"{diff_events(events, want)}\n  got {events}")

        # A later agent's table (version 2, a field appended) serves v1 calls.
        gets, events = under_fake(prog, "later", FT_FAKE_VERSION=2, FT_FAKE_SIZE=API_SIZE + 8)
        check(events == EXPECTED, f"a version 2 table: {diff_events(events, EXPECTED)}\n"
              f"  got {events}")

        # A table older than asked for, or one too small to hold anything,
        # is no agent at all.
        for name, knobs in (("v0", {"FT_FAKE_VERSION": 0}), ("tiny", {"FT_FAKE_SIZE": 4})):
            gets, events = under_fake(prog, name, **knobs)
            check(gets == [1, 1] and events == [],
                  f"{knobs}: the header used the table: gets {gets}, events {events}")

        # A header newer than the agent asks for version 2, gets NULL, and
        # every call is a no-op; it asks once per unit, not at every call.
        gets, events = under_fake(newer, "v2-request")
        check(gets == [2, 2], f"a version 2 header asked {gets}, expected [2, 2]")
        check(events == [], f"calls reached an agent that refused the version: {events}")


# --------------------------------------------------------------------------
# The installed package


def pkg(prefix_pc, *args):
    env = clean_env(PKG_CONFIG_PATH=prefix_pc)
    return must(["pkg-config"] + list(args) + ["forktrace"], f"pkg-config {' '.join(args)}",
                env=env).strip()


def ld_preload_seen(forktrace, cwd, env):
    """The first LD_PRELOAD entry a command run by forktrace is started
    with (its initial environment: the agent hides it from the program)."""
    rc, out, err = run([forktrace, "run", "-q", "-o", "preload.json", "--",
                        "/bin/sh", "-c", "tr '\\0' '\\n' < /proc/$$/environ | "
                        "sed -n 's/^LD_PRELOAD=//p'"], cwd=cwd, env=env)
    check(rc == 0, f"{forktrace} run exited {rc}\n  stderr: {err[-3000:]}")
    return re.split(r"[ :]", out.strip())[0]


@test
def test_install(t):
    cmake = os.environ.get("FT_CMAKE") or "cmake"
    build = os.environ.get("FT_BUILD_DIR", "")
    check(os.path.isfile(os.path.join(build, "cmake_install.cmake")),
          f"FT_BUILD_DIR={build!r} is not a configured build tree")
    # The build itself needs pkg-config (find_package(PkgConfig REQUIRED)).
    check(shutil.which("pkg-config"), "pkg-config is not on PATH")
    prefix = t.path("prefix")
    must([cmake, "--install", build, "--prefix", prefix], "cmake --install")
    for rel in ("bin/forktrace", "lib/forktrace/libforktrace-agent.so",
                "lib/forktrace/libforktrace-h5.so", "lib/forktrace/libforktrace-sym.so",
                "include/forktrace.h",
                "include/forktrace/wire.h", "lib/pkgconfig/forktrace.pc",
                "lib/cmake/forktrace/forktraceConfig.cmake",
                "lib/cmake/forktrace/forktraceConfigVersion.cmake",
                "lib/cmake/forktrace/forktraceTargets.cmake"):
        check(os.path.isfile(os.path.join(prefix, rel)), f"cmake --install did not install {rel}")
    env = clean_env()
    real_agent = os.path.realpath(os.path.join(prefix, "lib/forktrace/libforktrace-agent.so"))

    # The installed forktrace finds the installed agent, and traces.
    run_dir = t.subdir("run")
    fbin = os.path.join(prefix, "bin", "forktrace")
    rc, out, err = run([fbin, "run", "-o", "t.json", "--", "/bin/true"], cwd=run_dir, env=env)
    check(rc == 0, f"installed forktrace exited {rc}\n  stderr: {err[-3000:]}")
    tpath = os.path.join(run_dir, "t.json")
    check(os.path.isfile(tpath), "installed forktrace wrote no t.json")
    root = ft.load_trace(tpath).root()
    check(root.instrumented, f"the agent was not in /bin/true: {root.describe()}")
    seen = ld_preload_seen(fbin, run_dir, env)
    check(seen == real_agent, f"installed forktrace preloads {seen!r}, not {real_agent!r}")
    # The build tree's forktrace still uses the agent next to it.
    build_bin, build_agent = os.environ.get("FT_BIN"), os.environ.get("FT_AGENT")
    if build_bin and build_agent:
        seen = ld_preload_seen(build_bin, run_dir, env)
        check(seen == os.path.realpath(build_agent),
              f"the build tree's forktrace preloads {seen!r}, not {build_agent!r}")

    # A consumer project: find_package(forktrace) + forktrace::forktrace.
    cc, cxx = compilers()[0]
    cbuild = t.path("consumer-build")
    must([cmake, "-S", os.path.join(SRC, "consumer"), "-B", cbuild,
          "-DCMAKE_PREFIX_PATH=" + prefix, "-DCMAKE_C_COMPILER=" + cc,
          "-DCMAKE_CXX_COMPILER=" + cxx, "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON"],
         "configuring the find_package consumer", env=env)
    must([cmake, "--build", cbuild, "-j2"], "building the find_package consumer", env=env)
    with open(os.path.join(cbuild, "compile_commands.json")) as f:
        cmds = f.read()
    check(os.path.join(prefix, "include") in cmds,
          f"the consumer was not compiled against {prefix}/include:\n{cmds}")
    with open(os.path.join(cbuild, "forktrace_vars.txt")) as f:
        pvars = dict(line.split("=", 1) for line in f.read().splitlines())
    check(pvars.get("forktrace_VERSION", "").count(".") == 2,
          f"no forktrace_VERSION: {pvars}")
    for key, want in (("forktrace_AGENT", real_agent),
                      ("forktrace_EXECUTABLE", os.path.realpath(fbin)),
                      ("forktrace_INCLUDE_DIR", os.path.realpath(os.path.join(prefix, "include")))):
        check(os.path.realpath(pvars.get(key, "")) == want,
              f"{key} is {pvars.get(key)!r}, expected {want!r}")
    app = os.path.join(cbuild, "app")
    app_out, _ = run_prog(app, env, "the find_package consumer")
    check("cxx 1" in app_out and "done" in app_out, f"consumer output {app_out!r}")
    # ... and it runs the same under the installed forktrace.
    rc, out, err = run([fbin, "run", "-q", "-o", "app.json", "--", app], cwd=run_dir, env=env)
    check(rc == 0 and out == app_out,
          f"the consumer under forktrace: exit {rc}, stdout {out!r} (untraced {app_out!r})\n"
          f"  stderr: {err[-3000:]}")
    # A version the package does not provide is refused.
    bad = t.subdir("consumer-v9")
    with open(os.path.join(bad, "CMakeLists.txt"), "w") as f:
        f.write("cmake_minimum_required(VERSION 3.13)\nproject(v9 LANGUAGES NONE)\n"
                "find_package(forktrace 9.0 REQUIRED)\n")
    rc, out, err = run([cmake, "-S", bad, "-B", os.path.join(bad, "b"),
                        "-DCMAKE_PREFIX_PATH=" + prefix], env=env)
    check(rc != 0, "find_package(forktrace 9.0) succeeded: the version file is wrong")

    # A consumer built with pkg-config's flags, and pkg-config's agent.
    pc_dir = os.path.join(prefix, "lib", "pkgconfig")
    cflags = pkg(pc_dir, "--cflags")
    libs = pkg(pc_dir, "--libs")
    check("-I" + os.path.join(prefix, "include") in cflags.split(),
          f"pkg-config --cflags forktrace is {cflags!r}")
    pc_exe = t.path("pc_app")
    must([cc, "-std=c99"] + C_WARN + cflags.split() + [os.path.join(SRC, "use_all.c"),
          "-o", pc_exe] + libs.split(), "building the pkg-config consumer")
    out, _ = run_prog(pc_exe, env, "the pkg-config consumer")
    check("done" in out, f"pkg-config consumer output {out!r}")
    agent = pkg(pc_dir, "--variable=agent")
    check(os.path.isfile(agent) and os.path.realpath(agent) == real_agent,
          f"pkg-config --variable=agent forktrace is {agent!r}, not the installed agent")

    # DESTDIR staging: the files land under DESTDIR, the .pc names the
    # final prefix.
    stage = t.path("stage")
    must([cmake, "--install", build, "--prefix", "/opt/ft-final"], "cmake --install with DESTDIR",
         env=clean_env(DESTDIR=stage))
    staged_pc = os.path.join(stage, "opt/ft-final/lib/pkgconfig/forktrace.pc")
    check(os.path.isfile(staged_pc), "DESTDIR install has no forktrace.pc")
    with open(staged_pc) as f:
        check("prefix=/opt/ft-final\n" in f.read(), f"{staged_pc} does not name /opt/ft-final")
    check(not os.path.exists("/opt/ft-final"), "DESTDIR install wrote outside DESTDIR")

    # An install whose path LD_PRELOAD cannot carry is refused up front.
    spaced = t.path("pre fix")
    shutil.copytree(prefix, spaced, symlinks=True)
    rc, out, err = run([os.path.join(spaced, "bin", "forktrace"), "run", "-o", "s.json", "--",
                        "/bin/true"], cwd=run_dir, env=env)
    check(rc != 0 and "LD_PRELOAD" in err,
          f"a forktrace under a path with a space: exit {rc}, stderr {err!r}")
    check(not os.path.exists(os.path.join(run_dir, "s.json")), "a trace was written anyway")


if __name__ == "__main__":
    ft.main()
