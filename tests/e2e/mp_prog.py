"""Traced by test_tools.py python_mp: a multiprocessing Pool of 3 workers
(fork start method), then subprocess.run of /bin/echo, once with the
inherited environment and once with env={}. Writes the pids of the workers
that did work to workers.txt (stdout stays the same from run to run)."""

import multiprocessing
import os
import subprocess
import sys


def work(x):
    return x * x, os.getpid()


def main():
    multiprocessing.set_start_method("fork")
    pool = multiprocessing.Pool(3)
    results = pool.map(work, range(30), chunksize=1)
    pool.close()
    pool.join()
    print("squares", sum(r[0] for r in results), flush=True)
    with open("workers.txt", "w") as f:
        for pid in sorted({r[1] for r in results}):
            f.write(f"{pid}\n")
    subprocess.run(["/bin/echo", "hi"], check=True)
    subprocess.run(["/bin/echo", "empty-env"], env={}, check=True)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
