"""Shared harness for the forktrace end-to-end tests.

Each test script registers test functions with @test and ends with main().
ctest runs `python3 SCRIPT NAME`; main() gives the test a fresh private
directory (parallel-safe), runs it, and exits 0 (pass), 1 (fail) or 77
(skipped: ctest's SKIP_RETURN_CODE). A failing test keeps its directory and
prints its path, the forktrace command line, its stderr and the process
tree of the trace, so a failure can be read without re-running it.

The environment comes from tests/CMakeLists.txt:
  FT_BIN          the forktrace executable
  FT_PROGS        the directory of tests/progs binaries
  FT_E2E_TMP      where the private directories go (default: $TMPDIR)
  FT_STATIC_SKIP  non-empty: why static binaries could not be built
  FT_MPI_SKIP     non-empty: why mpi_hello could not be built
  FT_MPIRUN       the mpirun to use
  FT_KEEP=1       keep the directories of passing tests too

Each test's forktrace runs get a TMPDIR of their own, /tmp/ftt-XXXXXXXX.

Nothing here depends on the order of processes or events in the trace.
"""

import collections
import gzip
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback

PYTHON = "/usr/bin/python3"
SKIP_CODE = 77

# A multi-host run's summary starts with the number of hosts.
SUMMARY_RE = re.compile(
    r"^forktrace: (?:\d+ hosts?, )?(\d+) processes, (\d+) events, (\d+) lost, trace written "
    r"to (.+)$")
# forktrace's note that --max-memory made it spill process data to disk.
SPILL_RE = re.compile(r"^forktrace: process data past --max-memory \((\d+) bytes\) was spilled to disk: (\d+) bytes$")
# A multi-host run's line for a host whose part is not in the trace.
MISSING_RE = re.compile(r"^forktrace: host .*: part missing: ")
# A run's note that it removed what runs killed before it left: tests that
# kill forktrace leave such runs, and a test running beside them may be
# the one that cleans up.
STALE_RE = re.compile(r"^forktrace: removed \d+ director(y|ies) left by forktrace runs that were killed")
EXIT_KINDS = ("code", "signal", "unknown", "running", "host_lost")
SPAWN_KINDS = ("fork", "vfork", "posix_spawn", "posix_spawnp", "system", "popen")


class Skip(Exception):
    """Raised by a test that cannot run here (missing toolchain piece)."""


def fail(msg):
    raise AssertionError(msg)


def check(cond, msg):
    if not cond:
        fail(msg)


def wait_until(cond, what, started=None, timeout=20):
    """Polls cond() until it returns a true value, and returns that value.
    Fails naming what when timeout seconds pass first, or as soon as the
    forktrace started with Context.start (started) has ended: a test waits
    for what it is about, never a fixed time that a loaded machine can
    outlast."""
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if started is not None and started[0].poll() is not None:
            fail(f"forktrace ended (rc {started[0].returncode}) while waiting for {what}: "
                 f"{started[0].stderr.read().decode(errors='replace')[-2000:]}")
        if time.monotonic() > deadline:
            fail(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.005)


# --------------------------------------------------------------------------
# Environment


def agent_var(name):
    """A variable of the agent's, read from inside a traced process: the
    agent hides them from os.environ (the program sees the environment it
    would untraced); the process's initial environment still has them."""
    with open("/proc/self/environ", "rb") as f:
        for e in f.read().split(b"\0"):
            if e.startswith(name.encode() + b"="):
                return e.split(b"=", 1)[1].decode()
    raise KeyError(name)


def forktrace_bin():
    path = os.environ.get("FT_BIN", "")
    check(path and os.access(path, os.X_OK),
          f"FT_BIN={path!r} is not an executable forktrace (is the collector built?)")
    return path


def forktrace_without(module, d):
    """A copy of forktrace and its agent in the new directory d, without
    module (a file that the build has next to forktrace); its path."""
    import shutil
    src = os.path.dirname(forktrace_bin())
    check(os.path.exists(os.path.join(src, module)),
          f"the build has no {module} next to forktrace in {src}")
    os.makedirs(d)
    for name in ("forktrace", "libforktrace-agent.so"):
        shutil.copy2(os.path.join(src, name), d)
    return os.path.join(d, "forktrace")


def prog(name):
    """Absolute path of a tests/progs program; skips when the build did."""
    if name == "static_child" and os.environ.get("FT_STATIC_SKIP"):
        raise Skip(os.environ["FT_STATIC_SKIP"])
    if name == "mpi_hello" and os.environ.get("FT_MPI_SKIP"):
        raise Skip(os.environ["FT_MPI_SKIP"])
    d = os.environ.get("FT_PROGS", "")
    path = os.path.join(d, name)
    check(os.access(path, os.X_OK), f"test program {path} is missing (FT_PROGS={d!r})")
    return path


# --------------------------------------------------------------------------
# Loading a trace


class TraceFormatError(AssertionError):
    pass


def _no_duplicate_keys(pairs):
    obj = {}
    for k, v in pairs:
        if k in obj:
            raise TraceFormatError(f"duplicate key {k!r} in a JSON object")
        obj[k] = v
    return obj


def load_json(path):
    """Parses a trace file (.gz by content, not by name) strictly."""
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise TraceFormatError(f"{path}: not UTF-8: {e}")
    try:
        return json.loads(text, object_pairs_hook=_no_duplicate_keys)
    except json.JSONDecodeError as e:
        raise TraceFormatError(f"{path}: not valid JSON: {e}")


def report_meta(path):
    """The run header data ("meta") an HTML report embeds."""
    with open(path, encoding="utf-8") as f:
        html = f.read()
    m = re.search(r'<script type="application/json" id="ft-data">(.*?)</script>', html, re.S)
    check(m, f"{path}: no embedded data")
    return json.loads(m.group(1))["meta"]


class Proc:
    """One process of the trace, from its forktrace_process record."""

    def __init__(self, tpid, rec):
        self.tpid = tpid      # pid in the trace (out_pid)
        self.rec = rec        # forktrace_process args
        self.events = []      # every event whose pid is tpid
        self.threads = {}     # tid -> thread_name
        self.meta = collections.defaultdict(list)  # M name -> [args]

    # The forktrace_process keys of docs/TRACE_FORMAT.md, readable as
    # attributes (p.exit, p.argv, ...); a missing key reads as None so a
    # broken record fails an assertion instead of crashing the test.
    RECORD_KEYS = ("pid", "ppid", "parent", "start_ticks", "name", "exe", "argv", "cwd",
                   "start_ns", "end_ns", "spawn", "exit", "instrumented", "images",
                   "lost_events", "interpreter", "rank", "rank_var", "local_rank",
                   "launcher")

    def __getattr__(self, key):
        rec = self.__dict__.get("rec")
        if rec is not None and key in Proc.RECORD_KEYS:
            return rec.get(key)
        raise AttributeError(key)

    @property
    def image_slices(self):
        """The process image slices ("X", cat "process"), by image index."""
        xs = [e for e in self.events if e.get("ph") == "X" and e.get("cat") == "process"]
        return sorted(xs, key=lambda e: e.get("args", {}).get("image", -1))

    def marks(self, cat=None, name=None):
        """Instants and slices inside the process other than image slices."""
        out = []
        for e in self.events:
            if e.get("ph") not in ("i", "I", "X") or e.get("cat") == "process":
                continue
            if cat is not None and e.get("cat") != cat:
                continue
            if name is not None and e.get("name") != name:
                continue
            out.append(e)
        return out

    def thread_names(self):
        return set(self.threads.values())

    def describe(self):
        r = self.rec
        argv = r.get("argv")
        if isinstance(argv, list) and len(argv) > 6:
            argv = argv[:6] + ["..."]
        return (f"[tpid {self.tpid} pid {r.get('pid')} parent {r.get('parent')} "
                f"name {r.get('name')!r} argv {argv} spawn {r.get('spawn')} "
                f"exit {json.dumps(r.get('exit'))} instrumented {r.get('instrumented')} "
                f"images {r.get('images')}]")

    __repr__ = describe


class Trace:
    def __init__(self, doc, path="?"):
        self.path = path
        self.doc = doc
        check(isinstance(doc, dict), f"{path}: top level is not an object")
        check(isinstance(doc.get("traceEvents"), list), f"{path}: no traceEvents array")
        other = doc.get("otherData")
        check(isinstance(other, dict) and isinstance(other.get("forktrace"), dict),
              f"{path}: no otherData.forktrace object")
        self.meta = other["forktrace"]
        self.events = doc["traceEvents"]
        self.procs = {}
        for e in self.events:
            check(isinstance(e, dict) and "ph" in e, f"{path}: event without ph: {e!r}")
            if e["ph"] == "M" and e.get("name") == "forktrace_process":
                tpid = e.get("pid")
                check(tpid not in self.procs,
                      f"{path}: two forktrace_process records for pid {tpid}")
                self.procs[tpid] = Proc(tpid, e.get("args") or {})
        for e in self.events:
            p = self.procs.get(e.get("pid"))
            if p is None:
                continue
            p.events.append(e)
            if e["ph"] == "M":
                p.meta[e.get("name")].append(e.get("args") or {})
                if e.get("name") == "thread_name":
                    p.threads[e.get("tid")] = (e.get("args") or {}).get("name")
        self.by_host_pid = collections.defaultdict(list)
        for p in self.procs.values():
            self.by_host_pid[p.rec.get("pid")].append(p)

    # -- lookups ----------------------------------------------------------

    def all(self):
        return list(self.procs.values())

    def find(self, name=None, argv=None, argv_has=None, pred=None):
        """Processes matching every criterion given (argv: exact list;
        argv_has: an element of argv equal to it, or a list of such)."""
        out = []
        has = [argv_has] if isinstance(argv_has, str) else (argv_has or [])
        for p in self.procs.values():
            if name is not None and p.rec.get("name") != name:
                continue
            pargv = p.rec.get("argv") or []
            if argv is not None and pargv != argv:
                continue
            if any(h not in pargv for h in has):
                continue
            if pred is not None and not pred(p):
                continue
            out.append(p)
        return out

    def one(self, **kw):
        found = self.find(**kw)
        crit = ", ".join(f"{k}={v!r}" for k, v in kw.items() if k != "pred")
        if len(found) != 1:
            fail(f"expected exactly one process with {crit}, found {len(found)}: {found[:20]}\n"
                 f"{self.dump()}")
        return found[0]

    def get(self, tpid):
        return self.procs.get(tpid)

    def parent_of(self, p):
        return self.procs.get(p.rec.get("parent"))

    def children(self, p):
        return [q for q in self.procs.values() if q.rec.get("parent") == p.tpid]

    def descendants(self, p):
        out, todo = [], [p]
        while todo:
            cur = todo.pop()
            for c in self.children(cur):
                out.append(c)
                todo.append(c)
        return out

    def ancestors(self, p):
        out, seen = [], {p.tpid}
        cur = self.parent_of(p)
        while cur is not None and cur.tpid not in seen:
            out.append(cur)
            seen.add(cur.tpid)
            cur = self.parent_of(cur)
        return out

    def roots(self):
        return [p for p in self.procs.values() if p.rec.get("parent") == -1]

    def root(self):
        r = self.roots()
        check(len(r) == 1, f"expected one root process (parent -1), found {r}\n{self.dump()}")
        return r[0]

    def flows(self, ph):
        return [e for e in self.events if e.get("ph") == ph and e.get("cat") == "fork"]

    def dump(self, limit=60):
        """The process tree as text, for failure messages."""
        lines = [f"process tree of {self.path} ({len(self.procs)} processes):"]
        dups = [ps for ps in self.by_host_pid.values() if len(ps) > 1]
        if dups:
            lines.append(f"  {len(dups)} host pids recorded as more than one process, e.g.:")
            for ps in dups[:5]:
                for p in ps:
                    lines.append(f"    {p.describe()} start_ns {p.rec.get('start_ns')} "
                                 f"end_ns {p.rec.get('end_ns')}")
        shown = 0
        seen = set()

        def walk(p, depth):
            nonlocal shown
            if p.tpid in seen:
                return
            seen.add(p.tpid)
            if shown < limit:
                lines.append("  " + "  " * depth + p.describe())
            shown += 1
            for c in sorted(self.children(p), key=lambda q: q.rec.get("start_ns") or 0):
                walk(c, depth + 1)

        for r in sorted(self.roots(), key=lambda q: q.rec.get("start_ns") or 0):
            walk(r, 0)
        for p in self.procs.values():  # unreachable (cycles, dangling parents)
            if p.tpid not in seen:
                walk(p, 0)
        if shown > limit:
            lines.append(f"  ... {shown - limit} more")
        return "\n".join(lines)


def load_trace(path):
    check(os.path.exists(path), f"trace {path} was not written")
    return Trace(load_json(path), path)


# --------------------------------------------------------------------------
# Assertions on processes


def exit_str(ex):
    return json.dumps(ex, sort_keys=True)


def _ctx(p, trace):
    return p.describe() + (f"\n{trace.dump()}" if trace else "")


def assert_exit(p, code=None, signal=None, kind=None, trace=None):
    ex = p.rec.get("exit")
    if not isinstance(ex, dict):
        fail(f"process has no exit object: {_ctx(p, trace)}")
    if code is not None and not (ex.get("kind") == "code" and ex.get("code") == code):
        fail(f"expected exit code {code}, trace says {exit_str(ex)}: {_ctx(p, trace)}")
    if signal is not None:
        names = {9: "SIGKILL", 11: "SIGSEGV", 15: "SIGTERM", 6: "SIGABRT", 2: "SIGINT"}
        want = {"kind": "signal", "signal": signal}
        if signal in names:
            want["name"] = names[signal]
        got = {k: ex.get(k) for k in want}
        if got != want:
            fail(f"expected exit {exit_str(want)}, trace says {exit_str(ex)}: {_ctx(p, trace)}")
    if kind is not None and ex.get("kind") != kind:
        fail(f"expected exit kind {kind!r}, trace says {exit_str(ex)}: {_ctx(p, trace)}")


def assert_parent(child, parent, trace=None):
    if child.rec.get("parent") != parent.tpid:
        fail(f"expected {child.describe()} to be a child of {_ctx(parent, trace)}")
    if child.rec.get("ppid") != parent.rec.get("pid"):
        fail(f"ppid of {child.describe()} is {child.rec.get('ppid')}, expected the host pid "
             f"{parent.rec.get('pid')} of its parent {_ctx(parent, trace)}")


def assert_descendant(p, ancestor, trace):
    if ancestor.tpid not in {a.tpid for a in trace.ancestors(p)}:
        fail(f"expected {p.describe()} under {_ctx(ancestor, trace)}")


def assert_instrumented(p, want=True, trace=None):
    if p.rec.get("instrumented") is not want:
        fail(f"expected instrumented={want} for {_ctx(p, trace)}")


def assert_count(items, n, what, trace=None):
    if len(items) != n:
        extra = f"\n{trace.dump()}" if trace else ""
        fail(f"expected {n} {what}, found {len(items)}: {items[:20]}{extra}")


def assert_flow(trace, parent, child, kind):
    """A flow start in the parent and its end in the child, same id and kind."""
    starts = [e for e in trace.flows("s") if e.get("pid") == parent.tpid and e.get("name") == kind]
    ends = [e for e in trace.flows("f") if e.get("pid") == child.tpid and e.get("name") == kind]
    check(ends, f"no '{kind}' flow end in {child.describe()}")
    ids = {e.get("id") for e in starts}
    check(any(e.get("id") in ids for e in ends),
          f"no '{kind}' flow from {parent.describe()} to {child.describe()} "
          f"(starts {starts}, ends {ends})")


def basename(path):
    return os.path.basename(path) if isinstance(path, str) else path


# --------------------------------------------------------------------------
# Running forktrace


class Result:
    def __init__(self, argv, rc, stdout, stderr, elapsed, cwd, out_path, pid):
        self.argv = argv
        self.rc = rc
        self.stdout = stdout
        self.stderr = stderr
        self.elapsed = elapsed
        self.cwd = cwd
        self.out_path = out_path  # absolute path of the expected trace
        self.pid = pid            # forktrace's pid
        self.trace = None

    @property
    def err(self):
        return self.stderr.decode("utf-8", "replace")

    @property
    def out(self):
        return self.stdout.decode("utf-8", "replace")

    def summary_lines(self):
        return [m for m in (SUMMARY_RE.match(l) for l in self.err.splitlines()) if m]

    def spill_lines(self):
        return [m for m in (SPILL_RE.match(l) for l in self.err.splitlines()) if m]

    def command_stderr(self):
        """stderr without forktrace's own summary line: what the command wrote."""
        lines = self.stderr.split(b"\n")
        keep = [l for l in lines
                if not SUMMARY_RE.match(l.decode("utf-8", "replace"))
                and not SPILL_RE.match(l.decode("utf-8", "replace"))
                and not STALE_RE.match(l.decode("utf-8", "replace"))
                and not MISSING_RE.match(l.decode("utf-8", "replace"))]
        return b"\n".join(keep)

    def describe(self):
        return (f"command: {' '.join(self.argv)}\n  cwd: {self.cwd}\n  exit: {self.rc} "
                f"after {self.elapsed:.2f} s\n  stdout: {self.out[-2000:]!r}\n"
                f"  stderr: {self.err[-3000:]!r}")


class Context:
    """What a test gets: its private directory and the ways to run things."""

    def __init__(self, name, root):
        self.name = name
        self.dir = root
        self.results = []
        self.expected_leftovers = set()

    def path(self, *parts):
        return os.path.join(self.dir, *parts)

    def subdir(self, name):
        d = self.path(name)
        os.makedirs(d, exist_ok=True)
        return d

    def start(self, args, cwd=None, env=None, stdin=subprocess.DEVNULL):
        """Starts forktrace with exactly args (in its own session); returns
        what finish() needs."""
        argv = [forktrace_bin()] + list(args)
        cwd = cwd or self.dir
        forks0 = system_forks()
        t0 = time.monotonic()
        p = subprocess.Popen(argv, cwd=cwd, stdin=stdin, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, env=env, start_new_session=True)
        return p, argv, cwd, (t0, forks0)

    def finish(self, started, timeout=45):
        """Waits for a forktrace started with start(); returns a Result."""
        p, argv, cwd, (t0, forks0) = started
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(p.pid)
            kill_leftovers(self.dir)
            try:
                out, err = p.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                out, err = b"", b"(output lost: a process outside the test still holds the pipes)"
            fail(f"forktrace did not finish within {timeout} s (deadlock or lost child?)\n"
                 f"command: {' '.join(argv)}\nstdout: {out[-2000:]!r}\nstderr: {err[-3000:]!r}")
        res = Result(argv, p.returncode, out, err, time.monotonic() - t0, cwd, None, p.pid)
        res.system_forks = system_forks() - forks0
        self.results.append(res)
        return res

    def forktrace(self, args, cwd=None, timeout=45, env=None, stdin=subprocess.DEVNULL):
        """Runs forktrace with exactly args; returns a Result (no trace loaded)."""
        return self.finish(self.start(args, cwd=cwd, env=env, stdin=stdin), timeout=timeout)

    @staticmethod
    def run_args(cmd, opts=(), out="trace.json", quiet=False):
        """The argv of `forktrace run [opts] [-q] [-o out] -- cmd`."""
        args = ["run"] + list(opts)
        if quiet:
            args.append("-q")
        if out is not None:
            args += ["-o", out]
        return args + ["--"] + list(cmd)

    def run(self, cmd, opts=(), out="trace.json", cwd=None, timeout=45, env=None,
            expect_rc=None, quiet=False, single_root=True, allow_running=False,
            leftovers_ok=False):
        """forktrace run [opts] [-o out] -- cmd; loads and sanity-checks the trace.

        The common checks (see check_common) run on every trace; expect_rc
        is checked before anything else so a crash reads as a crash."""
        cwd = cwd or self.dir
        res = self.forktrace(self.run_args(cmd, opts, out, quiet), cwd=cwd, timeout=timeout,
                             env=env)
        return self.load(res, out=out, expect_rc=expect_rc, quiet=quiet,
                         single_root=single_root, allow_running=allow_running,
                         leftovers_ok=leftovers_ok)

    def load(self, res, out="trace.json", expect_rc=None, quiet=False, single_root=True,
             allow_running=False, leftovers_ok=False):
        """Checks the exit code, leftovers, loads res's trace and runs check_common."""
        out_name = out if out is not None else "forktrace.json"
        res.out_path = out_name if os.path.isabs(out_name) else os.path.join(res.cwd, out_name)
        if expect_rc is not None:
            check(res.rc == expect_rc,
                  f"forktrace exited {res.rc}, expected {expect_rc}\n  {res.describe()}")
        if not leftovers_ok:
            left = leftover_processes(self.dir, exclude=self.expected_leftovers)
            check(not left, f"processes still running after forktrace returned: {left}\n"
                  f"  {res.describe()}")
        check(os.path.exists(res.out_path),
              f"no trace at {res.out_path}\n  {res.describe()}")
        res.trace = load_trace(res.out_path)
        check_common(res, quiet=quiet, single_root=single_root, allow_running=allow_running)
        return res

    def untraced(self, cmd, cwd, timeout=45, env=None):
        """Runs cmd without forktrace: (rc, stdout, stderr); a death by signal N
        is reported as 128 + N, the way forktrace reports it."""
        p = subprocess.run(cmd, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=timeout, env=env)
        rc = p.returncode if p.returncode >= 0 else 128 - p.returncode
        return rc, p.stdout, p.stderr

    def run_compare(self, cmd, opts=(), timeout=45, env=None, setup=None, sort_lines=False,
                    **kw):
        """Runs cmd untraced in DIR/untraced and traced in DIR/traced, and
        checks exit code, stdout and stderr are the same (forktrace's summary
        line aside). setup(dir) prepares each directory first. sort_lines
        compares the outputs as sorted lines, for commands whose output
        order depends on scheduling (make -j, mpirun). Returns the traced
        Result."""
        udir, tdir = self.subdir("untraced"), self.subdir("traced")
        if setup:
            setup(udir)
            setup(tdir)
        urc, uout, uerr = self.untraced(cmd, udir, timeout=timeout, env=env)
        res = self.run(cmd, opts=opts, cwd=tdir, timeout=timeout, env=env, **kw)
        terr = res.command_stderr()
        if sort_lines:
            uout, uerr = _sorted_lines(uout), _sorted_lines(uerr)
            tout, terr = _sorted_lines(res.stdout), _sorted_lines(terr)
        else:
            tout = res.stdout
        check(res.rc == urc, f"exit code differs: traced {res.rc}, untraced {urc}\n  {res.describe()}")
        check(tout == uout,
              f"stdout differs:\n  untraced {uout[-2000:]!r}\n  traced   {tout[-2000:]!r}")
        check(terr == uerr,
              f"stderr differs:\n  untraced {uerr[-2000:]!r}\n  traced   {terr[-2000:]!r}")
        return res


def strace_forktrace_run(cmd, cwd, log, events, out="trace.json", env=None, timeout=60):
    """`forktrace run -q -o out -- cmd` under `strace -f -qq -e trace=EVENTS
    -o log`, to count the system calls of the whole tree. Skips without
    strace or where ptrace is not allowed. LeakSanitizer (the ASan build
    of forktrace) cannot run under ptrace, so it is turned off. Returns
    (argv, finished Popen with .stdout and .stderr bytes); checks rc 0."""
    strace = shutil.which("strace")
    if not strace:
        raise Skip("strace is not installed")
    env = dict(os.environ if env is None else env)
    env["ASAN_OPTIONS"] = ":".join(x for x in (env.get("ASAN_OPTIONS"), "detect_leaks=0") if x)
    # -s 256: paths whole (the socket's is longer than strace's default 32).
    argv = [strace, "-f", "-qq", "-s", "256", "-o", log, "-e", "trace=" + events, forktrace_bin(),
            "run", "-q", "-o", out, "--"] + list(cmd)
    p = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout, p.stderr = p.communicate(timeout=timeout)
    if p.returncode != 0 and b"Operation not permitted" in p.stderr:
        raise Skip("strace cannot trace here: " + p.stderr.decode(errors="replace")[:200])
    check(p.returncode == 0, f"strace forktrace run: rc {p.returncode}\n"
          f"{p.stderr.decode(errors='replace')[-2000:]}")
    return argv, p


def system_forks():
    """Processes created on this machine since boot (/proc/stat)."""
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith("processes "):
                return int(line.split()[1])
    return 0


def pid_max():
    with open("/proc/sys/kernel/pid_max") as f:
        return int(f.read())


def assert_no_duplicate_pids(res):
    """Fewer processes were created on the whole machine during the run
    than there are pids, so no pid can have been reused: two processes of
    the trace with one host pid are one process recorded twice (except the
    pids a test reused on purpose: res.reused_pids)."""
    tr = res.trace
    allowed = getattr(res, "reused_pids", ())
    # Host pid -1: processes whose pid nobody could know (a posix_spawn
    # child whose exec failed, reaped inside posix_spawn).
    dups = {pid: ps for pid, ps in tr.by_host_pid.items()
            if len(ps) > 1 and pid not in allowed and pid != -1}
    if not dups:
        return
    if getattr(res, "system_forks", 0) >= pid_max() - 1000:
        return  # pids may really have wrapped around
    pid, ps = next(iter(dups.items()))
    fail(f"{len(dups)} host pids appear as two processes, but only "
         f"{getattr(res, 'system_forks', 0)} processes "
         f"were created on the machine during the run (pid_max {pid_max()}): no pid was reused. "
         f"E.g. pid {pid}: " +
         "; ".join(f"{p.describe()} start_ns {p.start_ns} end_ns {p.end_ns}" for p in ps) +
         f"\n{tr.dump()}")


def _sorted_lines(b):
    return b"\n".join(sorted(b.split(b"\n")))


def check_common(res, quiet=False, single_root=True, allow_running=False):
    """Checks every trace must pass, whatever the scenario:
    - the summary line (unless -q) matches the trace and reports 0 lost;
    - run metadata: exit_status is forktrace's exit code, processes is the
      number of processes, lost_events is 0;
    - every process has one forktrace_process and one process_name record,
      a known exit kind, a spawn kind from the list, no lost events, and a
      parent that is -1 or a process of the trace; no parent cycles;
    - every event belongs to a process of the trace;
    - exactly one root (unless single_root=False);
    - nothing left "running" or "unknown" (unless allow_running);
    - no process recorded twice (assert_no_duplicate_pids)."""
    t = res.trace
    assert_no_duplicate_pids(res)
    ctx = f"\n  {res.describe()}"
    lines = res.summary_lines()
    if quiet:
        check(not lines, f"-q given but forktrace printed its summary line{ctx}")
    else:
        check(len(lines) == 1, f"expected one summary line on stderr, found {len(lines)}{ctx}")
        m = lines[0]
        n, lost, path = int(m.group(1)), int(m.group(3)), m.group(4)
        check(n == len(t.procs), f"summary says {n} processes, the trace has {len(t.procs)}{ctx}")
        check(lost == 0, f"summary reports {lost} lost events{ctx}")
        given = os.path.relpath(res.out_path, res.cwd)
        check(path in (res.out_path, given, os.path.realpath(res.out_path)),
              f"summary names {path!r}, the trace is {res.out_path}{ctx}")
    meta = t.meta
    check(meta.get("exit_status") == res.rc,
          f"otherData.forktrace.exit_status is {meta.get('exit_status')}, forktrace exited {res.rc}{ctx}")
    check(meta.get("processes") == len(t.procs),
          f"otherData.forktrace.processes is {meta.get('processes')}, "
          f"the trace has {len(t.procs)} processes{ctx}")
    check(meta.get("lost_events") == 0, f"otherData.forktrace.lost_events is "
          f"{meta.get('lost_events')}{ctx}")
    for e in t.events:
        check(e.get("pid") in t.procs,
              f"event of pid {e.get('pid')} has no forktrace_process record: {e}{ctx}")
    for p in t.procs.values():
        r = p.rec
        check(len(p.meta.get("process_name", [])) == 1,
              f"{p.describe()} has {len(p.meta.get('process_name', []))} process_name records")
        shown = r.get("name") if r.get("interpreter") is None else \
            f"{r.get('name')} ({r.get('interpreter')})"
        check(not p.meta.get("process_name") or p.meta["process_name"][0].get("name") == shown,
              f"{p.describe()}: process_name {p.meta.get('process_name')}, expected {shown!r}")
        check(r.get("parent") == -1 or r.get("parent") in t.procs,
              f"{p.describe()} names a parent that is not in the trace")
        ex = r.get("exit")
        check(isinstance(ex, dict) and ex.get("kind") in EXIT_KINDS,
              f"{p.describe()}: bad exit object {ex!r}")
        if not allow_running and ex.get("kind") in ("running", "unknown"):
            fail(f"{p.describe()}: exit is {ex.get('kind')!r} but forktrace waited for "
                 f"everything{ctx}\n{t.dump()}")
        check(r.get("spawn") is None or r.get("spawn") in SPAWN_KINDS,
              f"{p.describe()}: bad spawn {r.get('spawn')!r}")
        check(r.get("lost_events") == 0, f"{p.describe()} lost {r.get('lost_events')} events")
        chain = t.ancestors(p)
        check(p.tpid not in {a.tpid for a in chain}, f"parent cycle through {p.describe()}")
    check_critical_path(t, ctx)
    if single_root:
        t.root()


def check_critical_path(t, ctx=""):
    """otherData.forktrace.critical_path, when there, as docs/TRACE_FORMAT.md
    defines it: steps of processes of the trace, named as they are, that
    tile [start_ns, end_ns], which ends when the last process ended."""
    cp = t.meta.get("critical_path")
    if cp is None:
        return
    at = cp.get("start_ns")
    for st in cp.get("steps", []):
        p = t.procs.get(st.get("pid"))
        check(p is not None, f"critical path step of pid {st.get('pid')} not in the trace{ctx}")
        check(st.get("start_ns") == at and st.get("end_ns") > at,
              f"critical path step {st} does not follow at {at}: {cp}{ctx}")
        check(p is None or st.get("name") == p.meta["process_name"][0].get("name"),
              f"critical path step {st} is not named as its process{ctx}")
        at = st.get("end_ns")
    check(at == cp.get("end_ns"), f"critical path steps end at {at}, not at its end: {cp}{ctx}")
    last = max((p.rec.get("end_ns") for p in t.procs.values()
                if (p.rec.get("end_ns") or -1) >= 0), default=None)
    check(last is None or cp.get("end_ns") == last,
          f"critical path ends at {cp.get('end_ns')}, the last process at {last}{ctx}")


# --------------------------------------------------------------------------
# Processes left behind


def _kill_group(pgid):
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def leftover_processes(directory, exclude=()):
    """Live processes whose working directory is inside directory (ours:
    every test directory is private), as "pid comm" strings."""
    directory = os.path.realpath(directory)
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == os.getpid() or int(d) in exclude:
            continue
        try:
            cwd = os.readlink(f"/proc/{d}/cwd")
            with open(f"/proc/{d}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        state = stat[stat.rfind(")") + 2:][:1]
        if state in ("Z", "X"):
            continue
        if cwd == directory or cwd.startswith(directory + "/"):
            comm = stat[stat.find("(") + 1:stat.rfind(")")]
            out.append(f"{d} {comm}")
    return out


def kill_leftovers(directory):
    for entry in leftover_processes(directory):
        try:
            os.kill(int(entry.split()[0]), signal.SIGKILL)
        except OSError:
            pass


# --------------------------------------------------------------------------
# Test registry and entry point

_TESTS = {}


def test(fn):
    _TESTS[fn.__name__.removeprefix("test_")] = fn
    return fn


def main():
    if len(sys.argv) != 2 or sys.argv[1] not in _TESTS:
        print(f"usage: {sys.argv[0]} TEST\ntests: {' '.join(sorted(_TESTS))}", file=sys.stderr)
        sys.exit(2)
    name = sys.argv[1]
    base = os.environ.get("FT_E2E_TMP") or tempfile.gettempdir()
    os.makedirs(base, exist_ok=True)
    wd = tempfile.mkdtemp(prefix=f"ft-{name}-", dir=base)
    # Every forktrace of the test gets a TMPDIR of its own (short: the
    # socket's path must fit sun_path), unless the test sets one: a run
    # removes what killed runs of its user left in its TMPDIR, and in a
    # shared one it would clean up after a test beside it that killed
    # forktrace on purpose and is still recovering the trace.
    # Sticky and open to all, as /tmp: processes that give up root reach
    # the socket directory in it.
    own_tmp = tempfile.mkdtemp(prefix="ftt-", dir="/tmp")
    os.chmod(own_tmp, 0o1777)
    os.environ["TMPDIR"] = own_tmp
    # Every run makes a key for multi-host runs (docs/MULTIHOST.md): here,
    # removed with the directory, so that runs the tests kill (SIGKILL
    # leaves the file) leave nothing in ~/.forktrace/keys. A user's
    # variable, not the agent's: a program sees it as it would untraced.
    os.environ.setdefault("FORKTRACE_KEY_DIR", os.path.join(own_tmp, "keys"))
    ctx = Context(name, wd)
    status = 1
    try:
        _TESTS[name](ctx)
        status = 0
        print(f"PASS {name}")
    except Skip as e:
        status = SKIP_CODE
        print(f"SKIP {name}: {e}")
    except AssertionError as e:
        print(f"FAIL {name}: {e}")
        frames = [f for f in traceback.extract_tb(e.__traceback__)
                  if os.path.basename(f.filename) != "ftcheck.py"]
        for f in frames[1:]:
            print(f"  at {os.path.basename(f.filename)}:{f.lineno}: {f.line}")
    except Exception:
        print(f"ERROR {name}: the test itself raised")
        traceback.print_exc(file=sys.stdout)
    finally:
        kill_leftovers(wd)
    if status == 1 or os.environ.get("FT_KEEP") == "1":
        print(f"(files kept in {wd}; TMPDIR was {own_tmp})")
    else:
        shutil.rmtree(wd, ignore_errors=True)
        shutil.rmtree(own_tmp, ignore_errors=True)
    sys.stdout.flush()
    sys.exit(status)
