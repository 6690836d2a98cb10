#!/usr/bin/python3
"""End-to-end tests of the agent's "must never" rules (STYLE.md, "What the
agent must never do"), one or more scenarios per rule a test can show.
Rules already covered in test_progs.py: 2 and 3 (mt_fork), 6 (vfork_exec),
7 (env_i, exec_empty_envp), 11 (close_range, close_loop), 13 for faults
(killed_children).

Each scenario runs a program of tests/progs untraced and traced
(run_compare: same exit code, stdout, stderr) and reads the trace back.
Every scenario also checks that the agent was really at work in the
process under test (a thread name, a FORK record), so that an agent that
silently disabled itself cannot pass.
"""

import collections
import grp
import os
import pwd
import re
import shutil
import stat
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ftcheck as ft  # noqa: E402
from ftcheck import check, prog, test  # noqa: E402


def wait_marks(p):
    """host pid of each child p's wait calls reaped -> exit object."""
    out = {}
    for m in p.marks(cat="wait", name="wait"):
        a = m.get("args") or {}
        out[a.get("child")] = a.get("exit")
    return out


def exit_key(p):
    ex = p.exit or {}
    return (ex.get("kind"), ex.get("code") if ex.get("kind") == "code" else ex.get("signal"))


def assert_agent_active(p, thread_name, tr):
    """The agent recorded something in p after the point under test."""
    check(thread_name in p.thread_names(),
          f"thread name {thread_name!r} (set after the point under test) missing from "
          f"{p.describe()}: threads {p.threads}\n{tr.dump()}")


# --------------------------------------------------------------------------
# Rule 1 (and 8): errno preserved; the agent's fd invisible to the program.


def errno_scenario(t, mode):
    res = t.run_compare([prog("errno_check"), mode], expect_rc=0)
    tr = res.trace
    root = tr.root()
    ft.assert_exit(root, code=0, trace=tr)
    check(b"errno_check done" in res.stdout, f"stdout: {res.stdout!r}")
    # Children recorded with their spawn kinds: the agent was at work
    # after all the failing calls.
    kinds = {k.spawn for k in tr.children(root)}
    check({"fork", "vfork", "posix_spawn", "system", "popen"} <= kinds,
          f"spawn kinds of the children: {kinds}\n{tr.dump()}")
    # The failed execs are in the trace (the agent recorded them and still
    # handed back the real call's errno).
    fails = root.marks(cat="exec", name="exec failed")
    check(len(fails) >= 9, f"{len(fails)} exec failed marks, expected >= 9: {fails}")
    kids = tr.children(root)
    codes = sorted(exit_key(k) for k in kids)
    for want in (("code", 3), ("code", 4), ("code", 0), ("code", 5)):
        check(want in codes, f"no child exited {want}: children {codes}\n{tr.dump()}")


@test
def test_errno_keep(t):
    errno_scenario(t, "keep")


@test
def test_errno_clear(t):
    """The same with an empty environ: system() and popen() then go
    through the agent's own spawn code, which must fail like glibc's."""
    errno_scenario(t, "clear")


# --------------------------------------------------------------------------
# Rules 1 and 9: hooks reached from signal handlers, while the same thread
# may be inside the agent.


@test
def test_sigchld_reenter(t):
    res = t.run_compare([prog("sig_reenter"), "chld"], expect_rc=0, timeout=50)
    tr = res.trace
    root = tr.root()
    ft.assert_exit(root, code=0, trace=tr)
    kids = tr.children(root)
    forks = [k for k in kids if k.spawn == "fork"]
    shells = [k for k in kids if k.spawn == "system"]
    ft.assert_count(forks, 300, "forked children", tr)
    ft.assert_count(shells, 5, "system() children", tr)
    for s in shells:
        ft.assert_exit(s, code=7, trace=tr)
    want = collections.Counter()
    for i in range(300):
        want[("code", i % 100) if i % 3 == 0 else ("code", i % 128) if i % 3 == 1
             else ("signal", 15)] += 1
    got = collections.Counter(exit_key(k) for k in forks)
    check(got == want, f"exits of the 300 children differ: missing {want - got}, "
          f"extra {got - want}\n{tr.dump()}")
    execd = [k for k in forks if k.name == "exit_with"]
    ft.assert_count(execd, 100, "children that exec'd exit_with", tr)
    for k in execd:
        ft.assert_instrumented(k, True, tr)
    # The handler reaped every child through the waitpid hook: each reap
    # is recorded, even those that interrupted the agent itself.
    waits = wait_marks(root)
    missing = [k.describe() for k in forks if k.rec.get("pid") not in waits]
    check(not missing, f"{len(missing)} children reaped in the SIGCHLD handler have no wait "
          f"mark, e.g. {missing[:5]}")
    # And the reaper's rusage with each, deferred or not: less what the
    # child reaped for those that sent EXIT ("wait"), whole for the
    # silent ones.
    bad = [(k.describe(), k.rec.get("rusage")) for k in forks
           if (k.rec.get("rusage") or {}).get("source") !=
           ("wait" if k.name == "exit_with" else "wait+descendants")]
    check(not bad, f"{len(bad)} children reaped in the SIGCHLD handler without the "
          f"handler's rusage, e.g. {bad[:3]}")


@test
def test_sigalrm_reenter(t):
    res = t.run_compare([prog("sig_reenter"), "alrm"], expect_rc=0, timeout=50)
    tr = res.trace
    root = tr.root()
    ft.assert_exit(root, code=0, trace=tr)
    check(root.images == 1, f"the agent moving its fd looked like an exec: {root.describe()}")
    kids = tr.children(root)
    ft.assert_count(kids, 300, "children", tr)
    got = collections.Counter(exit_key(k) for k in kids)
    want = collections.Counter(("code", i % 128) for i in range(300))
    check(got == want, f"exits of the children differ: missing {want - got}, "
          f"extra {got - want}\n{tr.dump()}")
    waits = wait_marks(root)
    for k in kids:
        check(k.spawn == "fork", f"spawn of {k.describe()}")
        check(k.rec.get("pid") in waits, f"no wait mark for {k.describe()}")


# --------------------------------------------------------------------------
# Rule 8: hooks called before the agent's constructor.


@test
def test_early_ctor(t):
    """libtp_early.so's constructor runs before the agent's (DT_NEEDED
    libraries are initialised before the LD_PRELOAD object: checked with
    LD_DEBUG=files below) and runs system() and fork+exec."""
    exe = prog("early_ctor")
    order = subprocess.run([exe], env=dict(os.environ,
                                           LD_DEBUG="files", LD_PRELOAD=agent_path()),
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=20)
    inits = re.findall(r"calling init: (\S+)", order.stderr.decode("utf-8", "replace"))
    names = [os.path.basename(p) for p in inits]
    check("libtp_early.so" in names and "libforktrace-agent.so" in names,
          f"LD_DEBUG=files shows {names}")
    check(names.index("libtp_early.so") < names.index("libforktrace-agent.so"),
          f"the early library is initialised after the agent ({names}): this test would "
          f"not test anything")
    res = t.run_compare([exe], expect_rc=0)
    check(res.stdout == b"early-child\nearly_ctor main\n", f"stdout {res.stdout!r}")
    tr = res.trace
    root = tr.root()
    check(root.name == "early_ctor", f"root: {root.describe()}")
    ft.assert_exit(root, code=0, trace=tr)
    ft.assert_instrumented(root, True, tr)
    kids = tr.children(root)
    ft.assert_count(kids, 3, "children (system shell, early /bin/true, main's /bin/true)", tr)
    for k in kids:
        ft.assert_parent(k, root, tr)
        ft.assert_exit(k, code=0, trace=tr)
        ft.assert_instrumented(k, True, tr)
    shell = tr.one(argv=["sh", "-c", "echo early-child"])
    check(shell in kids, f"the early system() shell is not a child of the root: {shell}")
    trues = tr.find(name="true")
    ft.assert_count(trues, 2, "/bin/true children", tr)
    # main's child comes after the agent's constructor: fully recorded.
    check(any(k.spawn == "fork" for k in trues), f"main's fork not recorded: {trues}")
    for k in kids:
        check(k.start_ns >= root.start_ns, f"child starts before its parent: {k.describe()} "
              f"start {k.start_ns}, root start {root.start_ns}")


@test
def test_preinit(t):
    """A .preinit_array function (before any shared object's constructor)
    forks and execs: the child must be traced and the program unharmed."""
    res = t.run_compare([prog("preinit")], expect_rc=0)
    check(res.stdout == b"preinit ran\npreinit main\n", f"stdout {res.stdout!r}")
    tr = res.trace
    root = tr.root()
    ft.assert_exit(root, code=0, trace=tr)
    kids = tr.children(root)
    ft.assert_count(kids, 2, "children", tr)
    for code in (41, 42):
        k = tr.one(argv=["exit_with", str(code)])
        ft.assert_parent(k, root, tr)
        ft.assert_exit(k, code=code, trace=tr)
        ft.assert_instrumented(k, True, tr)
    late = tr.one(argv=["exit_with", "42"])
    check(late.spawn == "fork", f"main's fork not recorded: {late.describe()}")


# --------------------------------------------------------------------------
# Rule 11: the agent's fd.


def fd_flood(t, mode, child_name, thread_name):
    res = t.run_compare([prog("fd_flood"), mode], expect_rc=0)
    if res.rc == 77:
        raise ft.Skip(res.err.strip())
    tr = res.trace
    root = tr.root()
    ft.assert_exit(root, code=0, trace=tr)
    check(root.images == 1, f"keeping its connection made the agent record an exec: "
          f"{root.describe()}")
    assert_agent_active(root, thread_name, tr)
    k = tr.one(name=child_name)
    ft.assert_parent(k, root, tr)
    check(k.spawn == "fork", f"the fork after the flood was not recorded: {k.describe()}")
    ft.assert_exit(k, code=0, trace=tr)
    ft.assert_instrumented(k, True, tr)
    check(k.rec.get("pid") in wait_marks(root), f"no wait mark for {k.describe()}")
    return res


@test
def test_fd_dup2_flood(t):
    res = fd_flood(t, "dup2", "echo", "after-dup2")
    check(res.stdout == b"written through fd 1050\necho-child\nfd_flood dup2 ok\n",
          f"stdout {res.stdout!r}")


@test
def test_fd_raw_close(t):
    fd_flood(t, "rawclose", "true", "after-rawclose")


# --------------------------------------------------------------------------
# Rules 7 and 12: the environment is read once; exec keeps the agent even
# when the program removed it from its environment.


@test
def test_env_cleared(t):
    res = t.run_compare([prog("env_clear")], expect_rc=0)
    check(res.stdout == b"env_clear ok: popen-35\n", f"stdout {res.stdout!r}")
    tr = res.trace
    root = tr.root()
    ft.assert_exit(root, code=0, trace=tr)
    want = [(["exit_with", "31"], "fork", 31), (["true"], "fork", 0),
            (["exit_with", "32"], "fork", 32), (["exit_with", "33"], "vfork", 33),
            (["exit_with", "34"], "posix_spawnp", 34), (["sh", "-c", "exit 35"], "system", 35)]
    for argv, kind, code in want:
        # The agent's own system() passes "--" before the command, as
        # newer glibc does.
        alt = argv[:2] + ["--"] + argv[2:] if argv[0] == "sh" else argv
        k = tr.one(pred=lambda p: p.argv in (argv, alt))
        ft.assert_parent(k, root, tr)
        check(k.spawn == kind, f"spawn of {k.describe()} is not {kind!r}")
        ft.assert_exit(k, code=code, trace=tr)
        check((k.image_slices[-1].get("args") or {}).get("instrumented") is True,
              f"{k.describe()} lost the agent: its last image is not instrumented")
    pop = [k for k in tr.children(root) if k.spawn == "popen"]
    ft.assert_count(pop, 1, "popen children", tr)
    ft.assert_exit(pop[0], code=36, trace=tr)
    ft.assert_instrumented(pop[0], True, tr)
    ft.assert_count(tr.children(root), 7, "children", tr)


# --------------------------------------------------------------------------
# Rule 12: never honour the environment in a setuid program.


def agent_path():
    return os.path.join(os.path.dirname(ft.forktrace_bin()), "libforktrace-agent.so")


@test
def test_setuid(t):
    """forktrace runs as nobody; the command forks and execs a setuid-root
    copy of suid_probe, which links the agent itself (so the loader's
    refusal of LD_PRELOAD in setuid images is not what is tested). An
    agent that honoured FORKTRACE_SOCK there would connect as euid 0: the
    collector refuses it with a warning on stderr (run_compare fails) and
    the image would not be "not instrumented". Its child drops privileges
    and execs /bin/true; the loader stripped LD_PRELOAD from the setuid
    image's environment and the agent must not put it back, so that child
    is not traced at all (it is below an uninstrumented process, and
    exits before its parent)."""
    if os.geteuid() != 0:
        raise ft.Skip("needs root to make a setuid-root copy and to switch to nobody")
    setpriv = shutil.which("setpriv")
    if not setpriv:
        raise ft.Skip("setpriv (util-linux) not found")
    try:
        nobody = pwd.getpwnam("nobody").pw_uid
        nogroup = grp.getgrnam("nogroup").gr_gid
    except KeyError:
        raise ft.Skip("no user nobody or group nogroup")
    if os.statvfs(t.dir).f_flag & os.ST_NOSUID:
        raise ft.Skip(f"{t.dir} is on a nosuid file system")
    os.chmod(t.dir, 0o755)
    copy = t.path("suid_probe_root")
    shutil.copy(prog("suid_probe"), copy)
    os.chown(copy, 0, 0)
    os.chmod(copy, 0o4755)
    for d in ("untraced", "traced"):
        os.chmod(t.subdir(d), 0o777)
    # Every directory up to the programs must be searchable by nobody.
    for path in (copy, ft.forktrace_bin(), prog("suid_probe")):
        check(subprocess.run([setpriv, f"--reuid={nobody}", f"--regid={nogroup}",
                              "--clear-groups", "test", "-x", path]).returncode == 0,
              f"nobody cannot execute {path}: the build directory is not world-readable")
    as_nobody = [setpriv, f"--reuid={nobody}", f"--regid={nogroup}", "--clear-groups"]
    cmd = [prog("suid_probe"), "launch", copy]
    env = dict(os.environ, TMPDIR="/tmp")
    urc, uout, uerr = t.untraced(as_nobody + cmd, t.path("untraced"), env=env)
    check(urc == 0 and uout == b"suid_probe setuid ok\n",
          f"untraced run failed (setup?): rc {urc} stdout {uout!r} stderr {uerr!r}")
    tdir = t.path("traced")
    argv = as_nobody + [ft.forktrace_bin()] + t.run_args(cmd)
    t0 = time.monotonic()
    p = subprocess.run(argv, cwd=tdir, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=45, env=env)
    res = ft.Result(argv, p.returncode, p.stdout, p.stderr, time.monotonic() - t0, tdir, None,
                    0)
    t.load(res, expect_rc=0)
    check(res.stdout == uout, f"stdout differs: untraced {uout!r}, traced {res.stdout!r}")
    check(res.command_stderr() == uerr,
          f"stderr differs: untraced {uerr!r}, traced {res.command_stderr()!r}")
    tr = res.trace
    root = tr.root()
    ft.assert_instrumented(root, True, tr)
    ft.assert_exit(root, code=0, trace=tr)
    kids = tr.children(root)
    ft.assert_count(kids, 1, "children of the launcher", tr)
    su = kids[0]
    ft.assert_exit(su, code=0, trace=tr)
    last = su.image_slices[-1] if su.image_slices else {}
    check((last.get("args") or {}).get("instrumented") is False and
          str(last.get("name")).endswith("(not instrumented)"),
          f"the setuid image was instrumented: the agent acted in a setuid program: {last}")
    check((last.get("args") or {}).get("argv") == ["suid_probe", "setuid"],
          f"setuid image argv (from the launcher's exec record): {last}")
    ft.assert_count(tr.find(name="true"), 0,
                    "traced /bin/true (the setuid image passed the agent on)", tr)


# --------------------------------------------------------------------------
# Rule 13: fatal signals are reported, and not swallowed.


@test
def test_fatal_raise(t):
    for sig in (6, 7, 8):
        sub = t.subdir(f"sig{sig}")
        urc, uout, uerr = t.untraced([prog("raise_fatal"), str(sig)], sub)
        check(urc == 128 + sig, f"untraced raise_fatal {sig} exited {urc}")
        res = t.run([prog("raise_fatal"), str(sig)], cwd=sub, expect_rc=128 + sig)
        check(res.command_stderr() == uerr, f"stderr: {res.command_stderr()!r} vs {uerr!r}")
        tr = res.trace
        p = tr.root()
        ft.assert_exit(p, signal=sig, trace=tr)
        marks = p.marks(cat="signal")
        check(any((m.get("args") or {}).get("signal") == sig for m in marks),
              f"no signal mark for {sig}: {p.marks()}")


@test
def test_fatal_ignored(t):
    """A fatal signal the program ignores (SIG_IGN, inherited across exec)
    stays ignored: the agent puts back any disposition but the default, so
    raise(SIGFPE) returns, traced as untraced."""
    res = t.run_compare(["sh", "-c", f"trap '' FPE; exec {prog('raise_fatal')} 8"],
                        expect_rc=100)
    ft.assert_exit(res.trace.one(name="raise_fatal"), code=100, trace=res.trace)

@test
def test_fatal_unwind(t):
    """The agent's fatal-signal handler returns through its own restorer
    (agent/signal.c): a debugger must still see a signal frame there and
    unwind through it to the program's frames, as through glibc's."""
    gdb = shutil.which("gdb")
    if not gdb:
        raise ft.Skip("gdb is not installed")
    # gdb stops at the raise, then inside the agent's handler (which
    # raises again once SIGABRT is back to its default).
    cmd = [gdb, "-q", "-nx", "-batch", "-ex", "run", "-ex", "continue", "-ex", "bt",
           "--args", prog("raise_fatal"), "6"]
    res = t.run(cmd, cwd=t.subdir("gdb"))
    bt = [ln for ln in res.stdout.decode(errors="replace").splitlines() if ln.startswith("#")]
    handler = [i for i, ln in enumerate(bt) if "agent_on_fatal" in ln]
    check(handler, "gdb stopped elsewhere than in the agent's handler:\n" + "\n".join(bt))
    rest = bt[handler[0] + 1:]
    check(rest and "<signal handler called>" in rest[0],
          "no signal frame above the agent's handler:\n" + "\n".join(bt))
    check(any(" main " in ln or ln.rstrip().endswith(" main ()") or " in main " in ln
              for ln in rest),
          "gdb did not unwind through the signal frame to main:\n" + "\n".join(bt))


# --------------------------------------------------------------------------
# Rules 3 (STYLE house rule) and 10: a static look at the agent itself.

# The only symbols the agent may export: the hooks.
AGENT_EXPORTS = sorted("""
    _Exit _exit close close_range closefrom dup2 dup3 execl execle
    execlp execv execve execveat execvp execvpe exit fexecve fork pclose popen posix_spawn
    posix_spawnp prctl pthread_create pthread_exit pthread_setname_np system vfork wait
    wait3 wait4 waitid waitpid
    __cyg_profile_func_enter __cyg_profile_func_exit ft__api_get dlclose seccomp_load
""".split())


def tool(name):
    path = shutil.which(name)
    if not path:
        raise ft.Skip(f"{name} (binutils) not found")
    return path


def run_tool(argv):
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
    check(p.returncode == 0, f"{' '.join(argv)} failed: {p.stderr!r}")
    return p.stdout.decode()


@test
def test_agent_symbols(t):
    so = agent_path()
    check(os.path.exists(so), f"no agent at {so}")
    nm, readelf = tool("nm"), tool("readelf")
    undef = run_tool([nm, "-D", "--undefined-only", so])
    check("__tls_get_addr" not in undef,
          "the agent imports __tls_get_addr: some TLS is global-dynamic (rule 10)")
    relocs = run_tool([readelf, "-rW", so])
    bad = [l for l in relocs.splitlines()
           if re.search(r"R_X86_64_(TLSDESC|DTPMOD64|DTPOFF64)|R_AARCH64_TLSDESC", l)]
    check(not bad, "dynamic TLS relocations (global/local-dynamic TLS, rule 10):\n" +
          "\n".join(bad))
    defined = run_tool([nm, "-D", "--defined-only", so])
    names = sorted({l.split()[-1].split("@")[0] for l in defined.splitlines()
                    if len(l.split()) >= 3 and l.split()[1] in "TtWwDdBbVviu"
                    and l.split()[1] not in "tdb"})
    extra = sorted(set(names) - set(AGENT_EXPORTS))
    missing = sorted(set(AGENT_EXPORTS) - set(names))
    check(not extra, f"the agent exports more than its hooks (hidden visibility): {extra}")
    check(not missing, f"hooks no longer exported: {missing}")
    dyn = run_tool([readelf, "-dW", so])
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", dyn)
    check(needed == ["libc.so.6"], f"the agent needs {needed}, expected only libc.so.6")


@test
def test_agent_segments(t):
    """The agent is two mappings in every traced image: its text and its
    writable data. No GNU_RELRO part split off by mprotect (-z norelro),
    and no .bss past the file's last page, which would be an anonymous
    mapping of its own (AGENT_DATA, agent/internal.h). Each mapping more
    is one more to create and tear down per image and to copy per fork."""
    so = agent_path()
    page = os.sysconf("SC_PAGE_SIZE")
    heads = run_tool([tool("readelf"), "-lW", so])
    loads = [l.split() for l in heads.splitlines() if l.split()[:1] == ["LOAD"]]
    check(len(loads) == 2, f"the agent has {len(loads)} LOAD segments, expected 2:\n{heads}")
    check("GNU_RELRO" not in heads, f"the agent has a GNU_RELRO segment:\n{heads}")
    vaddr, filesz, memsz = (int(loads[-1][i], 16) for i in (2, 4, 5))
    file_end = -(-(vaddr + filesz) // page)
    mem_end = -(-(vaddr + memsz) // page)
    check(mem_end == file_end,
          f"the agent's .bss ends {mem_end - file_end} page(s) past its file: an anonymous "
          f"mapping in every image; put the new zero-initialised object in AGENT_DATA")
    # What the loader made of it, in a traced image.
    res = t.run(["cat", "/proc/self/maps"], expect_rc=0)
    maps = [l for l in res.out.splitlines() if l.endswith("/" + os.path.basename(so))]
    check(len(maps) == 2, "a traced image maps the agent " + str(len(maps)) +
          " times, expected 2:\n" + "\n".join(maps))


if __name__ == "__main__":
    ft.main()
