"""A simulated cluster for the multi-host tests: real namespaces, real sshd.

    with Cluster(3, workdir) as c:
        c.run_on("head", ["ssh", "node2", "hostname"])      # -> node2

Every host (node1..nodeN, and "head", where a test runs forktrace) is a
process tree of its own, started with util-linux `unshare --fork` into new
namespaces:

  network  one veth pair per node onto a bridge that lives in the head's
           network namespace (the head's own address is on the bridge), so
           nothing is created in the machine's network namespace;
  UTS      its own hostname; every name resolves on every host through a
           generated hosts file bind-mounted over /etc/hosts;
  mount    private tmpfs on /tmp, /run and /dev/shm; a cluster home,
           shared by all hosts, bind-mounted over /root (it holds the ssh
           client's config, key and known_hosts, so a plain `ssh node2`
           works as on a cluster); everything else is the machine's, so the
           build directory is at the same path everywhere and any directory
           outside /tmp is the cluster's shared filesystem;
  pid      pids from 1: the host's init is pid 1, so pids collide across
           hosts;
  time     CLOCK_MONOTONIC and CLOCK_BOOTTIME offset by a different number
           of seconds per host (node i: 1000 * i s by default), so a trace
           that does not align clocks is off by minutes.

Each host runs Debian's OpenSSH sshd (-D -e, its own config, UsePAM no,
host keys and root's authorized key private to the tests) on its address,
port 22. Host keys and the user key are made once per build directory
(FT_CLUSTER_KEYS, else beside the work directory) and reused.

The host's init is this file run with --init as pid 1 of the host: it
mounts, sets the hostname, starts sshd, reaps orphans, and kills its whole
pid namespace when the test that started it goes away (its stdin closes),
so a crashed test leaves nothing behind. kill_host() kills that init
(SIGKILL from outside: the kernel kills everything in the namespace, as a
crashed machine). stop() kills every init by the pid it started and checks
that no process, namespace or network device of the cluster is left.

Python 3 standard library only; needs root, unshare/nsenter (util-linux),
ip (iproute2), sshd and ssh (openssh-server, openssh-client).
"""

import errno
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

SSHD = "/usr/sbin/sshd"
# The hosts' init runs with Debian's python3: a Python under the machine's
# /root (pyenv) is hidden on the hosts by the cluster home.
PYTHON = "/usr/bin/python3"
SKIP_CODE = 77
CLEAN_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
NS_KINDS = ("pid", "net", "mnt", "uts", "time")


class ClusterUnavailable(Exception):
    """This machine cannot host the cluster (not root, a tool or a kernel
    feature missing); tests turn it into a skip."""


class ClusterError(Exception):
    """The cluster did not come up, or did not go away cleanly."""


def unavailable_reason():
    """Why the cluster cannot run here, or None."""
    if os.geteuid() != 0:
        return "the simulated cluster needs root (namespaces, mounts, sshd)"
    for tool in ("unshare", "nsenter", "ip", "ssh", "ssh-keygen"):
        if shutil.which(tool) is None:
            return f"{tool} not found (scripts/setup-deps installs it)"
    if not os.access(SSHD, os.X_OK):
        return f"{SSHD} not found (install openssh-server; scripts/setup-deps)"
    if not os.path.exists("/proc/self/ns/time"):
        return "the kernel has no time namespaces (CONFIG_TIME_NS)"
    return None


def _run(argv, what, **kw):
    """Runs a setup command; raises ClusterError with its stderr on failure."""
    r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)
    if r.returncode != 0:
        raise ClusterError(f"{what}: {' '.join(argv)} exited {r.returncode}: "
                           f"{r.stderr.decode(errors='replace').strip()}")
    return r


def _keygen(keys_dir, name):
    """The ed25519 key keys_dir/name/key (and key.pub), made once: a pair
    is made in a directory of its own and renamed into place whole, so
    tests that start together in a fresh build directory all use the pair
    that won, never one's private key with another's public key."""
    final = os.path.join(keys_dir, name)
    if os.path.isfile(final):
        # A key file of an earlier layout (the pair beside each other).
        try:
            os.unlink(final)
        except FileNotFoundError:
            pass
    if not os.path.exists(os.path.join(final, "key.pub")):
        tmp = tempfile.mkdtemp(prefix=f".{name}-", dir=keys_dir)
        try:
            _run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"forktrace-cluster-{name}",
                  "-f", os.path.join(tmp, "key")], "ssh-keygen")
            os.rename(tmp, final)
        except OSError as e:
            if e.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return os.path.join(final, "key")


def _ns_inodes(pid):
    out = {}
    for kind in NS_KINDS:
        out[kind] = os.stat(f"/proc/{pid}/ns/{kind}").st_ino
    return out


def _children(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


class Host:
    """One simulated machine: name, address, clock offset (seconds), and
    the processes that hold it (unshare in the machine's pid namespace, its
    child the host's init, pid 1 inside)."""

    def __init__(self, name, addr, offset_s):
        self.name = name
        self.addr = addr
        self.offset_s = offset_s
        self.unshare = None   # Popen of `unshare --fork ...`
        self.init_pid = None  # the host's init, as the machine sees it
        self.ns = {}          # namespace kind -> inode, for the leftover check
        self.alive = False
        self.sshd_log = None

    def __repr__(self):
        return f"<host {self.name} {self.addr} +{self.offset_s}s init {self.init_pid}>"


class Cluster:
    """N nodes and a head. A context manager: start() on entry, stop() on
    exit (which raises ClusterError if anything of the cluster is left).

    n_hosts   number of nodes, named node1..nodeN
    workdir   where the cluster's files go (configs, logs, the cluster home,
              shared/): a directory outside /tmp; made if missing
    offsets   seconds of CLOCK_MONOTONIC/BOOTTIME offset per node (list of
              N), default 1000 * i for node i; head_offset for the head
    subnet    the first three octets of the cluster's /24 (the head is .1,
              node i is .(10 + i)); each cluster has its own bridge in its
              own namespace, so clusters started side by side do not meet
    """

    def __init__(self, n_hosts, workdir=None, offsets=None, head_offset=0, subnet="10.77.0",
                 keys_dir=None):
        reason = unavailable_reason()
        if reason:
            raise ClusterUnavailable(reason)
        if n_hosts < 1:
            raise ValueError("a cluster needs at least one node")
        self.workdir = os.path.abspath(workdir or tempfile.mkdtemp(prefix="ftcluster-"))
        if self.workdir == "/tmp" or self.workdir.startswith("/tmp/"):
            raise ValueError("the cluster's workdir must be outside /tmp (each host has its own /tmp)")
        self.keys_dir = os.path.abspath(keys_dir or os.environ.get("FT_CLUSTER_KEYS") or
                                        os.path.join(os.path.dirname(self.workdir), "cluster-keys"))
        if offsets is None:
            offsets = [1000 * i for i in range(1, n_hosts + 1)]
        if len(offsets) != n_hosts:
            raise ValueError("one offset per node")
        self.hosts = {"head": Host("head", f"{subnet}.1", head_offset)}
        for i in range(1, n_hosts + 1):
            self.hosts[f"node{i}"] = Host(f"node{i}", f"{subnet}.{10 + i}", offsets[i - 1])
        self.nodes = [f"node{i}" for i in range(1, n_hosts + 1)]
        self.prefix_len = 24
        self.subnet = f"{subnet}.0/{self.prefix_len}"
        self.home = os.path.join(self.workdir, "home")
        self.shared = os.path.join(self.workdir, "shared")
        self.etc = os.path.join(self.workdir, "etc")
        self.logs = os.path.join(self.workdir, "logs")
        self.ssh_config = os.path.join(self.home, ".ssh", "config")
        self.started = False

    # ------------------------------------------------------------------
    # Public API

    def __enter__(self):
        try:
            self.start()
        except BaseException:
            self.stop(check=False)
            raise
        return self

    def __exit__(self, *exc):
        # A failure inside the with block is the one to report; a leftover
        # found then is reported only when the block itself succeeded.
        self.stop(check=exc[0] is None)
        return False

    def addr(self, name):
        return self.hosts[name].addr

    def offset(self, name):
        return self.hosts[name].offset_s

    def clean_env(self, extra=None):
        """The environment of a login on a host: what sshd gives a session,
        nothing of the test's."""
        env = {"PATH": CLEAN_PATH, "HOME": "/root", "USER": "root", "LOGNAME": "root",
               "SHELL": "/bin/sh", "LANG": "C.UTF-8"}
        if extra:
            env.update(extra)
        return env

    def nsenter_argv(self, name, cwd=None):
        """The command prefix that runs a command inside host `name`."""
        h = self._live(name)
        return ["nsenter", "-t", str(h.init_pid), "-m", "-u", "-n", "-p", "-T",
                f"--wd={cwd or self.shared}", "--"]

    def popen_on(self, name, argv, cwd=None, env=None, **popen_kwargs):
        """Starts argv on host `name` (every namespace of the host entered;
        the working directory is cwd, default the shared directory; the
        environment a login would have, plus env). Returns the Popen of the
        nsenter in front of it, which exits with the command's status."""
        return subprocess.Popen(self.nsenter_argv(name, cwd) + list(argv),
                                env=self.clean_env(env), **popen_kwargs)

    def run_on(self, name, argv, cwd=None, env=None, timeout=60, check=False, **popen_kwargs):
        """Runs argv on host `name` to its end, as subprocess.run does
        (stdout and stderr captured unless given)."""
        popen_kwargs.setdefault("stdout", subprocess.PIPE)
        popen_kwargs.setdefault("stderr", subprocess.PIPE)
        popen_kwargs.setdefault("stdin", subprocess.DEVNULL)
        return subprocess.run(self.nsenter_argv(name, cwd) + list(argv), env=self.clean_env(env),
                              timeout=timeout, check=check, **popen_kwargs)

    def kill_host(self, name, silently=False):
        """Crashes host `name`: SIGKILL to its init, so the kernel kills
        every process of its pid namespace at once; its network namespace
        (and so its veth, on both ends) goes with the last of them. The
        kernel still closes the sockets of the killed processes, so peers
        see their connections end; with silently, the host is cut off the
        network first, so nothing more reaches anyone (a power failure):
        peers learn of it only by their own timeouts."""
        h = self.hosts[name]
        if not h.alive:
            return
        if silently:
            self.link_down(name)
        h.alive = False
        try:
            os.kill(h.init_pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            h.unshare.wait(timeout=10)
        except subprocess.TimeoutExpired:
            raise ClusterError(f"{name}: unshare {h.unshare.pid} did not end after its init was killed")

    def link_down(self, name):
        """Cuts host `name` off the network (its bridge port goes down): its
        connections stall, as when a switch port or cable fails."""
        self._ip_head(["link", "set", self._port(name), "down"])

    def link_up(self, name):
        self._ip_head(["link", "set", self._port(name), "up"])

    def mount_empty(self, name, path):
        """Mounts an empty tmpfs over path on host `name` only (for example
        the build directory: forktrace missing on that host)."""
        h = self._live(name)
        _run(["nsenter", "-t", str(h.init_pid), "-m", "--", "mount", "-t", "tmpfs",
              "-o", "mode=0755,size=1m", f"empty-{name}", path], f"{name}: mount tmpfs over {path}")

    # ------------------------------------------------------------------
    # Start

    def start(self):
        t0 = time.monotonic()
        self.started = True
        for d in (self.workdir, self.shared, self.etc, self.logs, self.keys_dir):
            os.makedirs(d, exist_ok=True)
        os.makedirs(self.home, mode=0o700, exist_ok=True)
        os.chmod(self.home, 0o700)
        self._make_keys()
        self._write_files()
        # Every host's namespaces first (in parallel: each init sets itself
        # up while the next starts), then the network, then sshd.
        for h in self.hosts.values():
            self._spawn(h)
        for h in self.hosts.values():
            self._await(h, "mounted")
        self._network()
        for h in self.hosts.values():
            self._send(h, "sshd")
        for h in self.hosts.values():
            self._await(h, "sshd-up")
        self.start_seconds = time.monotonic() - t0

    def _make_keys(self):
        self.user_key = _keygen(self.keys_dir, "user")
        self.host_keys = {name: _keygen(self.keys_dir, f"host_{name}") for name in self.hosts}

    def _write_files(self):
        hosts = ["127.0.0.1 localhost", "::1 localhost ip6-localhost ip6-loopback"]
        hosts += [f"{h.addr} {h.name}" for h in self.hosts.values()]
        with open(os.path.join(self.etc, "hosts"), "w") as f:
            f.write("\n".join(hosts) + "\n")
        ssh = os.path.join(self.home, ".ssh")
        os.makedirs(ssh, mode=0o700, exist_ok=True)
        shutil.copyfile(self.user_key, os.path.join(ssh, "id_ed25519"))
        shutil.copyfile(self.user_key + ".pub", os.path.join(ssh, "id_ed25519.pub"))
        os.chmod(os.path.join(ssh, "id_ed25519"), 0o600)
        shutil.copyfile(self.user_key + ".pub", os.path.join(ssh, "authorized_keys"))
        with open(os.path.join(ssh, "known_hosts"), "w") as f:
            for h in self.hosts.values():
                with open(self.host_keys[h.name] + ".pub") as k:
                    typ, blob = k.read().split()[:2]
                f.write(f"{h.name},{h.addr} {typ} {blob}\n")
        # The client config a cluster's users have: keys, no questions.
        with open(self.ssh_config, "w") as f:
            f.write("Host *\n"
                    "    User root\n"
                    "    IdentityFile ~/.ssh/id_ed25519\n"
                    "    IdentitiesOnly yes\n"
                    "    UserKnownHostsFile ~/.ssh/known_hosts\n"
                    "    GlobalKnownHostsFile /dev/null\n"
                    "    StrictHostKeyChecking yes\n"
                    "    BatchMode yes\n"
                    "    ConnectTimeout 5\n"
                    "    LogLevel ERROR\n")
        for h in self.hosts.values():
            with open(os.path.join(self.etc, f"sshd_{h.name}.conf"), "w") as f:
                f.write(f"ListenAddress {h.addr}\n"
                        "Port 22\n"
                        f"HostKey {self.host_keys[h.name]}\n"
                        "PidFile none\n"
                        "UsePAM no\n"
                        "PermitRootLogin prohibit-password\n"
                        "PubkeyAuthentication yes\n"
                        "PasswordAuthentication no\n"
                        "KbdInteractiveAuthentication no\n"
                        "AuthorizedKeysFile .ssh/authorized_keys\n"
                        "StrictModes no\n"
                        "UseDNS no\n"
                        "PrintMotd no\n"
                        "PrintLastLog no\n"
                        "MaxStartups 200\n"
                        "MaxSessions 200\n"
                        "LogLevel ERROR\n"
                        "Subsystem sftp internal-sftp\n")
            h.sshd_log = os.path.join(self.logs, f"sshd_{h.name}.log")

    def _spawn(self, h):
        conf = {"name": h.name, "hosts": os.path.join(self.etc, "hosts"), "home": self.home,
                "sshd_config": os.path.join(self.etc, f"sshd_{h.name}.conf"),
                "sshd_log": h.sshd_log, "addr": h.addr}
        argv = ["unshare", "--fork", "--kill-child", "--pid", "--mount-proc", "--net", "--uts",
                "--mount", "--propagation", "private", "--time",
                "--monotonic", str(h.offset_s), "--boottime", str(h.offset_s),
                PYTHON, os.path.abspath(__file__), "--init", json.dumps(conf)]
        log = open(os.path.join(self.logs, f"init_{h.name}.log"), "wb")
        h.unshare = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=log, env=self.clean_env(), close_fds=True)
        log.close()
        h.alive = True

    def _send(self, h, line):
        h.unshare.stdin.write(line.encode() + b"\n")
        h.unshare.stdin.flush()

    def _await(self, h, word, timeout=20):
        """Reads the init's next status line; expects word."""
        got = []

        def reader():
            got.append(h.unshare.stdout.readline())

        t = threading.Thread(target=reader, daemon=True)
        t.start()
        t.join(timeout)
        line = got[0].decode(errors="replace").strip() if got else ""
        if line != word:
            with open(os.path.join(self.logs, f"init_{h.name}.log"), errors="replace") as f:
                log = f.read()[-3000:]
            raise ClusterError(f"{h.name}: expected {word!r} from its init, got {line!r} "
                               f"(init log: {log!r})")
        if h.init_pid is None:
            kids = _children(h.unshare.pid)
            if len(kids) != 1:
                raise ClusterError(f"{h.name}: unshare {h.unshare.pid} has children {kids}")
            h.init_pid = kids[0]
            h.ns = _ns_inodes(h.init_pid)

    def _ip_head(self, args):
        head = self._live("head")
        _run(["nsenter", "-t", str(head.init_pid), "-n", "--", "ip"] + args, "ip in the head")

    def _port(self, name):
        return f"v{name}"

    def _network(self):
        """The bridge and the head's address in the head's namespace, one
        veth pair per node (the bridge port in the head's namespace, eth0
        in the node's), addresses; all from inside the namespaces."""
        head = self.hosts["head"]
        # The bridge gets an address of its own: without one it takes the
        # lowest of its ports', which changes when a killed node's port
        # goes, and the other nodes' cached entry for the head is stale.
        cmds = ["link set lo up",
                "link add br0 address 02:00:00:00:00:01 type bridge forward_delay 0 stp_state 0",
                f"addr add {head.addr}/{self.prefix_len} dev br0",
                "link set br0 up"]
        for name in self.nodes:
            h = self.hosts[name]
            cmds += [f"link add {self._port(name)} type veth peer name eth0 netns {h.init_pid}",
                     f"link set {self._port(name)} master br0",
                     f"link set {self._port(name)} up"]
        _run(["nsenter", "-t", str(head.init_pid), "-n", "--", "ip", "-batch", "-"],
             "network of the head", input="\n".join(cmds).encode() + b"\n")
        for name in self.nodes:
            h = self.hosts[name]
            cmds = ["link set lo up", f"addr add {h.addr}/{self.prefix_len} dev eth0",
                    "link set eth0 up"]
            _run(["nsenter", "-t", str(h.init_pid), "-n", "--", "ip", "-batch", "-"],
                 f"network of {name}", input="\n".join(cmds).encode() + b"\n")

    def _live(self, name):
        h = self.hosts.get(name)
        if h is None:
            raise KeyError(f"no host {name!r} in the cluster ({', '.join(self.hosts)})")
        if not h.alive or h.init_pid is None:
            raise ClusterError(f"host {name} is not running")
        return h

    # ------------------------------------------------------------------
    # Stop

    def stop(self, check=True):
        """Kills every host by the init it started and waits for the
        unshare in front of it; with check, raises ClusterError if a
        process, namespace or device of the cluster is still there."""
        if not self.started:
            return
        self.started = False
        for name in list(self.hosts)[::-1]:
            h = self.hosts[name]
            if h.unshare is None:
                continue
            if h.alive and h.init_pid is not None:
                try:
                    os.kill(h.init_pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            h.alive = False
            # Without an init pid (start failed early) closing stdin is the
            # init's signal to end its namespace.
            try:
                h.unshare.stdin.close()
            except OSError:
                pass
        for h in self.hosts.values():
            if h.unshare is None:
                continue
            try:
                h.unshare.wait(timeout=10)
            except subprocess.TimeoutExpired:
                h.unshare.kill()
                h.unshare.wait()
            h.unshare.stdout.close()
        if check:
            # The last exits of a killed host are asynchronous: give a
            # loaded machine time before calling anything left.
            left = self.leftovers(timeout=15)
            if left:
                raise ClusterError("the cluster left: " + "; ".join(left))

    def leftovers(self, timeout=5):
        """What of the cluster is still there: processes in its pid
        namespaces, or any process holding one of its namespaces. The
        kernel frees a namespace (and with a network namespace its
        devices) with the last process in it, so none left means nothing
        left; polls for a while, as the last exits are asynchronous."""
        ours = {}
        for h in self.hosts.values():
            for kind, ino in h.ns.items():
                if kind != "uts" and kind != "time":
                    ours[(kind, ino)] = h.name
        deadline = time.monotonic() + timeout
        while True:
            found = []
            for pid in os.listdir("/proc"):
                if not pid.isdigit():
                    continue
                for kind in ("pid", "net", "mnt"):
                    try:
                        ino = os.stat(f"/proc/{pid}/ns/{kind}").st_ino
                    except OSError:
                        continue
                    if (kind, ino) in ours:
                        found.append(f"process {pid} in {ours[(kind, ino)]}'s {kind} namespace")
                        break
            for h in self.hosts.values():
                if h.unshare is not None and h.unshare.poll() is None:
                    found.append(f"unshare {h.unshare.pid} of {h.name}")
            if not found or time.monotonic() > deadline:
                return found
            time.sleep(0.02)


# ----------------------------------------------------------------------
# The host's init (pid 1 of the host's namespaces)


def _say(word):
    os.write(1, word.encode() + b"\n")


def _init_main(conf):
    """Sets the host up, then reaps. Status lines go to stdout for the
    Cluster; commands come on stdin; EOF on stdin (the test is gone) kills
    the whole namespace."""
    name = conf["name"]

    def sh(*argv):
        r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        if r.returncode != 0:
            sys.stderr.write(f"{name}: {' '.join(argv)}: {r.stdout.decode(errors='replace')}\n")
            sys.exit(1)

    # A private /tmp, /run (with sshd's privilege separation directory)
    # and /dev/shm, as every machine has; the cluster's /etc/hosts and home.
    sh("mount", "-t", "tmpfs", "-o", "mode=1777", f"tmp-{name}", "/tmp")
    sh("mount", "-t", "tmpfs", "-o", "mode=0755", f"run-{name}", "/run")
    os.makedirs("/run/sshd", mode=0o755)
    sh("mount", "-t", "tmpfs", "-o", "mode=1777", f"shm-{name}", "/dev/shm")
    sh("mount", "--bind", conf["hosts"], "/etc/hosts")
    sh("mount", "--bind", conf["home"], "/root")
    socket.sethostname(name)
    os.chdir("/")
    _say("mounted")

    sshd = None
    stop = threading.Event()

    def commands():
        nonlocal sshd
        for line in sys.stdin:
            if line.strip() == "sshd":
                log = open(conf["sshd_log"], "ab")
                sshd = subprocess.Popen([SSHD, "-D", "-e", "-f", conf["sshd_config"]],
                                        stdin=subprocess.DEVNULL, stdout=log, stderr=log)
                log.close()
                deadline = time.monotonic() + 10
                while time.monotonic() < deadline:
                    try:
                        socket.create_connection((conf["addr"], 22), timeout=1).close()
                        break
                    except OSError:
                        if sshd.poll() is not None:
                            break
                        time.sleep(0.005)
                _say("sshd-up" if sshd.poll() is None else "sshd-failed")
        stop.set()
        # Everything in the namespace but this process, then this one: the
        # kernel kills the rest when pid 1 exits.
        try:
            os.kill(-1, signal.SIGKILL)
        except OSError:
            pass
        os._exit(0)

    threading.Thread(target=commands, daemon=True).start()
    # pid 1 reaps every orphan of the host.
    while not stop.is_set():
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            time.sleep(0.05)
        except InterruptedError:
            pass
        except OSError as e:
            if e.errno != errno.EINTR:
                raise


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--init":
        _init_main(json.loads(sys.argv[2]))
    else:
        sys.exit(f"usage: {sys.argv[0]} --init CONFIG (the Cluster runs it; see the docstring)")
