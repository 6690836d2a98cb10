#!/usr/bin/env python3
"""A stand-in for ssh and sshd on one machine, for the multi-host tests.

  fake_sshd.py serve SOCKET    the "sshd": runs outside the traced tree
  fake_sshd.py ssh SOCKET ARGS the "ssh" (a script named ssh execs this)

ssh reads its arguments as OpenSSH does (options, the destination, the
remote command joined with spaces) and hands the server its stdin, stdout
and stderr (SCM_RIGHTS) with the destination and the command. The server
runs the command as sshd would: `/bin/sh -c COMMAND` in a clean
environment (PATH, HOME, TMPDIR, FORKTRACE_KEY_DIR as the server got them,
SHELL=/bin/sh, SSH_CONNECTION from 127.0.0.1), outside the traced tree (so
no agent travels with it), in a UTS namespace named after the destination
when it may make one; it sends the exit code back, which ssh exits with.
An ssh with FAKE_SSH_DOWN=1 in its environment fails as ssh to a host that
is down: a line on stderr and exit code 255, the command never run.
"""
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import threading

# OpenSSH's options that take an argument.
ARG_OPTS = set("BbcDEeFIiJLlmOoPpQRSWw")


def serve(path):
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(16)
    keep = ("PATH", "HOME", "TMPDIR", "FORKTRACE_KEY_DIR")
    env = {k: os.environ[k] for k in keep if k in os.environ}
    env["SHELL"] = "/bin/sh"
    env["SSH_CONNECTION"] = "127.0.0.1 40000 127.0.0.1 22"
    uts = os.geteuid() == 0 and shutil.which("unshare") is not None

    def one(conn):
        with conn:
            msg, fds, _, _ = socket.recv_fds(conn, 65536, 3)
            req = json.loads(msg)
            host = req["host"].split("@")[-1]
            argv = ["/bin/sh", "-c", req["cmd"]]
            if uts:
                argv = ["unshare", "-u", "sh", "-c", 'hostname "$0" && exec "$@"', host] + argv
            p = subprocess.Popen(argv, stdin=fds[0], stdout=fds[1], stderr=fds[2], env=env,
                                 cwd=os.getcwd())
            for fd in fds:
                os.close(fd)
            rc = p.wait()
            conn.sendall(struct.pack("!i", rc if rc >= 0 else 128 - rc))

    print("ready", flush=True)
    while True:
        conn, _ = srv.accept()
        threading.Thread(target=one, args=(conn,), daemon=True).start()


def ssh(path, args):
    i = 0
    while i < len(args) and args[i].startswith("-"):
        i += 2 if args[i][1:] in ARG_OPTS else 1
    host, cmd = args[i], " ".join(args[i + 1:])
    if os.environ.get("FAKE_SSH_DOWN") == "1":
        sys.stderr.write(f"ssh: connect to host {host} port 22: No route to host\n")
        sys.exit(255)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    socket.send_fds(s, [json.dumps({"host": host, "cmd": cmd}).encode()], [0, 1, 2])
    data = b""
    while len(data) < 4:
        b = s.recv(4 - len(data))
        if not b:
            sys.exit(255)  # ssh's code for a connection that failed
        data += b
    sys.exit(struct.unpack("!i", data)[0])


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve(sys.argv[2])
    else:
        ssh(sys.argv[2], sys.argv[3:])
