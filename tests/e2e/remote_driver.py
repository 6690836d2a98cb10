"""Runs ssh command lines the ways a launcher does, for test_remote.py.

usage: remote_driver.py CASES.json

CASES.json is a list of [method, argv]: each argv runs in turn, with
FAKE_SSH_CASE set to its index, its output on this process's stdout, and
the driver exits with the sum of their exit codes (capped). Methods:
  subprocess  Python's subprocess (vfork, and its own $PATH search in the
              child: execve for each candidate)
  execvp      fork, then os.execvp in the child, with a $PATH whose first
              entry has no such program: the first execve fails, the
              second runs it
  spawnp      os.posix_spawnp (libc's posix_spawnp)
"""
import json
import os
import subprocess
import sys


def run(method, argv):
    if method == "subprocess":
        return subprocess.call(argv)
    if method == "execvp":
        pid = os.fork()
        if pid == 0:
            os.environ["PATH"] = "/nonexistent-ft-dir:" + os.environ["PATH"]
            try:
                os.execvp(argv[0], argv)
            finally:
                os._exit(127)
        return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    if method == "spawnp":
        pid = os.posix_spawnp(argv[0], argv, dict(os.environ))
        return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    raise SystemExit(f"unknown method {method}")


def main():
    with open(sys.argv[1]) as f:
        cases = json.load(f)
    total = 0
    for i, (method, argv) in enumerate(cases):
        sys.stdout.flush()
        os.environ["FAKE_SSH_CASE"] = str(i)
        total += run(method, argv)
    sys.stdout.flush()
    return min(total, 120)


if __name__ == "__main__":
    sys.exit(main())
