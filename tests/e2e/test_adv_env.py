#!/usr/bin/python3
"""End-to-end tests: the agent's environment and identity against hostile
or unusual programs.

- What the agent hands a new image (FORKTRACE_EXEC_TS) outlives an image
  that never loads the agent (a script whose interpreter is static) and
  can be forged: only the image it was meant for may take it, and nothing
  in it may crash the program.
- Children made by raw clone/clone3 system calls (no glibc fork) must not
  speak as their parent.
- The program sees the environment it would see untraced.
- An exec the agent's variables would push past the kernel's limit still
  happens.
"""

import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ftcheck as ft  # noqa: E402
from ftcheck import check, prog, test  # noqa: E402


def asan_build():
    """Is forktrace built with ASan? It then refuses to start with another
    library preloaded before its runtime."""
    with open(ft.forktrace_bin(), "rb") as f:
        return b"libasan" in f.read()


def static_shell(path):
    if not os.access(path, os.X_OK):
        raise ft.Skip(f"{path} is not installed (scripts/setup-deps installs it)")
    return path


def check_script_children(t, interp_line, what):
    """A script run by a static interpreter starts /bin/true four times and
    "sh -c 'exit 3'": every one of them must be in the trace, each a child
    of the script's process. The interpreter never loads the agent, so
    whatever the exec of the script handed over stays in its environment
    for all of them: taken, they all wrote into one slot of the process
    table and all but one went missing."""
    script = t.path("s.sh")
    with open(script, "w") as f:
        f.write(f"{interp_line}\nfor i in 1 2 3 4; do /bin/true; done\n"
                f"/bin/sh -c 'exit 3'\necho done\n")
    os.chmod(script, 0o755)
    res = t.run_compare(["/bin/bash", "-c", f"{script}; exit 0"], expect_rc=0)
    tr = res.trace
    trues = tr.find(name="true")
    ft.assert_count(trues, 4, f"/bin/true processes under a {what} script", tr)
    sh3 = [p for p in tr.find(name="sh") if (p.exit or {}).get("code") == 3]
    ft.assert_count(sh3, 1, "sh -c 'exit 3'", tr)
    parents = {tr.parent_of(p).tpid for p in trues + sh3}
    check(len(parents) == 1, f"the script's children have several parents\n{tr.dump()}")
    runner = tr.parent_of(trues[0])
    check(runner.argv[:1] == [script] or runner.argv[-1:] == [script],
          f"the script's children hang under {runner.describe()}, not the script\n{tr.dump()}")
    for p in trues + sh3:
        ft.assert_instrumented(p, True, tr)
        check(p.exe in ("/usr/bin/true", "/usr/bin/dash"),
              f"{p.describe()}: exe {p.exe!r} (another image's hand-over?)")
    return tr


@test
def test_static_interp_bash(t):
    check_script_children(t, f"#!{static_shell('/bin/bash-static')}", "bash-static")


@test
def test_static_interp_busybox(t):
    check_script_children(t, f"#!{static_shell('/bin/busybox')} sh", "busybox")


@test
def test_forged_exec_ts(t):
    """Children exec'd by raw execve (past the agent's hooks) with forged
    hand-overs: a slot past the table's end (taken, it would be SIGBUS at
    the first write), a slot index past 32 bits, the root's own slot (its HELLO
    was overwritten), values for other processes, and garbage. Each
    child must run and be traced as itself, the root intact."""
    res = t.run([prog("adv_env"), "forged"], expect_rc=0)
    tr = res.trace
    root = tr.root()
    check(root.name == "adv_env" and root.instrumented,
          f"the root's record was damaged: {root.describe()}\n{tr.dump()}")
    ft.assert_exit(root, code=0, trace=tr)
    kids = tr.children(root)
    codes = sorted((k.exit or {}).get("code") for k in kids)
    check(codes == list(range(10, 18)), f"children exited {codes}\n{tr.dump()}")
    for k in kids:
        check(k.name == "sh" and k.exe == "/usr/bin/dash" and k.instrumented,
              f"{k.describe()}: not the traced sh it is\n{tr.dump()}")
        check(k.rec.get("start_ticks", 0) > 1,
              f"{k.describe()}: start time {k.rec.get('start_ticks')} from a forged value")


@test
def test_forged_exec_ts_at_start(t):
    """A FORKTRACE_EXEC_TS in the environment forktrace run starts from
    (stale, from a tool that leaked it, or forged) is not COMMAND's: the
    command runs and is traced (taken, the hand-over would kill it with
    SIGBUS). The same with
    the agent's other variables set by the user: forktrace's own win, and
    the program sees none of them."""
    env = dict(os.environ, FORKTRACE_EXEC_TS="1:0:0:4000000:/bin/true",
               FORKTRACE_SOCK="/nonexistent/sock", FORKTRACE_SPILL="/nonexistent/spill",
               FORKTRACE_TABLE_FD="0")
    res = t.run(["/bin/sh", "-c",
                 "/bin/true; env | grep ^FORKTRACE_ | grep -v ^FORKTRACE_KEY_DIR=; exit 5"], env=env,
                expect_rc=5)
    check(res.stdout == b"", f"the program sees the agent's variables: {res.stdout!r}")
    tr = res.trace
    ft.assert_exit(tr.root(), code=5, trace=tr)
    for p in tr.all():
        ft.assert_instrumented(p, True, tr)
    ft.assert_count(tr.find(name="true"), 1, "true", tr)


@test
def test_nested_run(t):
    """forktrace run inside a traced program: the inner run traces its
    command into its own trace (the outer agent's variables are hidden
    from the inner forktrace, which sets its own), the outer trace holds
    the inner forktrace, and both exit as the command does."""
    fbin = ft.forktrace_bin()
    if asan_build():
        raise ft.Skip("an ASan forktrace cannot start under the agent (LD_PRELOAD before its runtime)")
    cmd = [fbin, "run", "-q", "-o", t.path("inner.json"), "--",
           "/bin/sh", "-c",
           "/bin/true; env | grep ^FORKTRACE_ | grep -vc ^FORKTRACE_KEY_DIR=; exit 4"]
    # The inner forktrace's signal sentinel (a raw clone child that runs
    # no hooked call) ends as an orphan of the outer run: a second root.
    res = t.run(cmd, expect_rc=4, single_root=False)
    check(res.stdout == b"0\n", f"the inner command sees the agents' variables: {res.stdout!r}")
    outer = res.trace
    top = outer.one(name="forktrace", pred=lambda p: p.rec.get("parent") == -1)
    ft.assert_exit(top, code=4, trace=outer)
    inner = ft.load_trace(t.path("inner.json"))
    root = inner.root()
    check(root.name == "sh", f"inner root: {root.describe()}\n{inner.dump()}")
    ft.assert_exit(root, code=4, trace=inner)
    tru = inner.one(name="true")
    ft.assert_parent(tru, root, inner)
    ft.assert_instrumented(tru, True, inner)


def check_raw_clone(t, how):
    """adv_env clone HOW: a child made by a raw clone system call forks a
    grandchild (which forks one exiting 41, then execs sh exiting 42) and
    execs sh exiting 43. It inherited its parent's agent: it must speak as
    itself: speaking as its parent, its exec would rename the root
    (adv_env would become "sh") and its children would hang under the
    root."""
    res = t.run([prog("adv_env"), "clone", how], expect_rc=0)
    tr = res.trace
    root = tr.root()
    check(root.name == "adv_env" and root.images == 1,
          f"the root was renamed by its raw clone child's exec: {root.describe()}\n{tr.dump()}")
    ft.assert_exit(root, code=0, trace=tr)
    by_code = {(p.exit or {}).get("code"): p for p in tr.all()}
    check(sorted(by_code) == [0, 41, 42, 43], f"exit codes {sorted(by_code)}\n{tr.dump()}")
    raw, grand, great = by_code[43], by_code[42], by_code[41]
    ft.assert_parent(raw, root, tr)
    ft.assert_parent(grand, raw, tr)
    ft.assert_parent(great, grand, tr)
    check(raw.name == "sh" and raw.instrumented and raw.rec.get("pid") != root.rec.get("pid"),
          f"raw clone child: {raw.describe()}")
    check(grand.spawn == "fork" and great.spawn == "fork",
          f"the raw child's fork records are not its own:\n{tr.dump()}")
    ft.assert_count(tr.all(), 4, "processes", tr)


@test
def test_raw_clone(t):
    check_raw_clone(t, "clone")


@test
def test_raw_clone3(t):
    check_raw_clone(t, "clone3")


@test
def test_raw_clone_vm(t):
    """A raw CLONE_VM | CLONE_VFORK child (what posix_spawn and Go make)
    shares the parent's memory: it must record nothing there (its exec
    would rename the root), and its new image is traced as itself."""
    res = t.run([prog("adv_env"), "clone", "vm"], expect_rc=0)
    tr = res.trace
    root = tr.root()
    check(root.name == "adv_env" and root.images == 1,
          f"the root was renamed by its CLONE_VM child's exec: {root.describe()}\n{tr.dump()}")
    kid = tr.one(name="sh")
    ft.assert_parent(kid, root, tr)
    ft.assert_exit(kid, code=44, trace=tr)
    ft.assert_instrumented(kid, True, tr)
    ft.assert_count(tr.all(), 2, "processes", tr)


LIBM = "/lib/x86_64-linux-gnu/libm.so.6"


def env_cases():
    """Commands that print the environment a program sees, several ways:
    (name, argv, extra environment variables)."""
    py = ("import os, subprocess, sys\n"
          "sys.stdout.write('os.environ: %r\\n' % sorted(os.environ.items()))\n"
          "sys.stdout.flush()\n"
          "subprocess.run(['/usr/bin/env'], env={})\n"
          "subprocess.run(['/usr/bin/env'], env={'B': '2', 'LD_PRELOAD': ''})\n"
          "pid = os.posix_spawn('/usr/bin/env', ['env'], {'A': '1'})\n"
          "os.waitpid(pid, 0)\n"
          "subprocess.run(['/usr/bin/env'])\n"
          "os.system('/usr/bin/env; tr \"\\\\0\" \" \" < /proc/$$/cmdline; echo')\n"
          "sys.stdout.write(os.popen('/usr/bin/env').read())\n")
    return [
        ("inherited", ["/usr/bin/env"], {}),
        ("env_i", ["env", "-i", "/usr/bin/env"], {}),
        ("env_i_var", ["env", "-i", "X=1", "/usr/bin/env"], {}),
        ("python", [ft.PYTHON, "-c", py], {}),
        ("user_preload", ["/bin/sh", "-c", "/usr/bin/env; echo \"sh sees [$LD_PRELOAD]\""],
         {"LD_PRELOAD": LIBM}),
        ("empty_preload", ["/bin/sh", "-c", "echo \"${LD_PRELOAD+set} [$LD_PRELOAD]\"; env"],
         {"LD_PRELOAD": ""}),
        ("own_preload", ["/bin/sh", "-c", f"LD_PRELOAD={LIBM} /usr/bin/env"], {}),
        ("unset_exec", ["/bin/bash", "-c", "unset PATH HOME; export Y=2; /usr/bin/env"], {}),
    ]


@test
def test_env_as_untraced(t):
    """Every program sees the environment it would see untraced: no
    LD_PRELOAD, FORKTRACE_SOCK or FORKTRACE_SPILL of the agent's, the
    user's own LD_PRELOAD as it was (set, empty or unset), in every shape
    of environment a program passes on (inherited, env -i, a custom one,
    Python's env={} and posix_spawn with a dict): an agent that left its
    variables in a custom environment would make `env -i env` print
    LD_PRELOAD and FORKTRACE_SOCK under forktrace and nothing untraced. The agent must still be in every process."""
    if not os.path.exists(LIBM):
        raise ft.Skip(f"{LIBM} is missing")
    asan = asan_build()
    for name, cmd, extra in env_cases():
        if asan and extra.get("LD_PRELOAD"):
            continue
        env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD",)}
        env.update(extra)
        sub = t.subdir(name)  # one directory: $PWD is part of it
        urc, uout, uerr = t.untraced(cmd, sub, env=env)
        res = t.run(cmd, cwd=sub, env=env, expect_rc=urc)
        check(res.stdout == uout, f"{name}: the environment differs:\n  untraced "
              f"{uout.decode(errors='replace')}\n  traced   {res.stdout.decode(errors='replace')}")
        # FORKTRACE_KEY_DIR is the user's (the harness sets it), not the agent's.
        shown = res.stdout.replace(b"FORKTRACE_KEY_DIR", b"")
        check(b"FORKTRACE_" not in shown and b"libforktrace" not in shown,
              f"{name}: the agent's variables show: {res.stdout!r}")
        tr = res.trace
        for p in tr.all():
            ft.assert_instrumented(p, True, tr)
        envs = tr.find(name="env")
        check(envs, f"{name}: no env process in the trace\n{tr.dump()}")


@test
def test_env_spill_kept(t):
    """A program that clears its environment still spills where forktrace
    said (FORKTRACE_SPILL travels like LD_PRELOAD): its child's agent,
    with the collector gone, writes to OUTPUT.spill, where `forktrace
    combine` is told to look, not to /tmp."""
    tmp = t.subdir("tmpdir")
    # Without the process table every image connects, and spills when
    # that fails.
    env = dict(os.environ, TMPDIR=tmp, FORKTRACE_TABLE_SLOTS="0")
    # The child waits for forktrace to be gone: killing forktrace is the
    # only way to make an agent spill.
    script = ("import os, signal, subprocess, time\n"
              "col = os.getppid()\n"
              "os.kill(col, signal.SIGKILL)\n"
              "def alive():\n"
              "    try:\n"
              "        with open(f'/proc/{col}/stat') as f:\n"
              "            return f.read().rsplit(')', 1)[1].split()[0] != 'Z'\n"
              "    except OSError:\n"
              "        return False\n"
              "while alive(): time.sleep(0.01)\n"
              "p = subprocess.Popen(['/bin/sh', '-c', 'exit 0'], env={})\n"
              "p.wait()\n"
              "print(p.pid)\n")
    res = t.forktrace(t.run_args([ft.PYTHON, "-c", script], out="trace.json"), env=env)
    check(res.rc != 0, f"forktrace was not killed: {res.describe()}")
    pid = res.stdout.decode().strip()
    check(pid.isdigit(), f"the child's pid was not printed: {res.stdout!r}\n  {res.describe()}")
    d = t.path("trace.json.spill")
    spills = os.listdir(d) if os.path.isdir(d) else []
    check(any(f.startswith(pid + "-") and f.endswith(".ftspill") for f in spills),
          f"no spill file of the child {pid} in trace.json.spill: {spills}")


def check_e2big(t, how):
    """An exec whose argv and environment come within a few dozen bytes
    of the kernel's limit runs untraced; the agent's variables took it
    past the limit (E2BIG, under forktrace only). It must run under
    forktrace too, as it would untraced: without the agent, shown from
    its parent's records as not instrumented."""
    res = t.run_compare([prog("adv_env"), "e2big", how], expect_rc=0)
    check(res.stdout == b"e2big ok\n", f"stdout {res.stdout!r}")
    tr = res.trace
    env = tr.one(name="env")
    ft.assert_parent(env, tr.root(), tr)
    ft.assert_exit(env, code=0, trace=tr)
    last = env.image_slices[-1] if env.image_slices else {}
    check((last.get("args") or {}).get("instrumented") is False and
          env.images == (2 if how == "fork" else 1),
          f"the env image is not shown as exec'd and not instrumented: {env.image_slices}")


@test
def test_exec_e2big(t):
    check_e2big(t, "fork")


@test
def test_spawn_e2big(t):
    check_e2big(t, "spawn")


@test
def test_slot_word_overwritten(t):
    """A traced program overwrites the committed word of its own slot of
    the process table (the table is shared with every traced process)
    with a value past the slot, then forks: the agent writes where it
    was (trusting the word, it would crash the program, copying past the
    slot). The
    collector may warn about the slot; the records after it count."""
    res = t.run([prog("adv_env"), "slot"], expect_rc=0)
    tr = res.trace
    root = tr.root()
    ft.assert_exit(root, code=0, trace=tr)
    kid = tr.one(pred=lambda p: (p.exit or {}).get("code") == 7)
    ft.assert_parent(kid, root, tr)


@test
def test_raw_clone_fatal(t):
    """A raw clone child dies of SIGABRT: the agent's fatal-signal handler
    must report it as the child's, not as its parent's (which then read
    as killed by SIGABRT, though it exited 0)."""
    res = t.run([prog("adv_env"), "clone", "abort"], expect_rc=0)
    tr = res.trace
    root = tr.root()
    ft.assert_exit(root, code=0, trace=tr)
    check(not root.marks(cat="signal"), f"the root carries its child's SIGABRT: {root.marks()}")
    kid = tr.one(pred=lambda p: p is not root)
    ft.assert_parent(kid, root, tr)
    ft.assert_exit(kid, signal=6, trace=tr)
    check([m.get("name") for m in kid.marks(cat="signal")] == ["SIGABRT"],
          f"the child's own SIGABRT mark: {kid.marks()}")


if __name__ == "__main__":
    ft.main()
