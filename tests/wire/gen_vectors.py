#!/usr/bin/python3
"""Independent encoder of the wire vectors (include/forktrace/wire.h).

Builds one frame per message type from the field values listed in README.md,
with msgpack-python rather than the agent's C encoder, and writes them to
vectors/<name>.bin, or with --check compares them with the checked-in files.

usage: gen_vectors.py [--check] [--dir DIR]
"""
import argparse
import os
import struct
import sys

import msgpack

# enum ft_msg_type
HELLO, FORK, EXEC, EXEC_FAIL, SPAWN, WAIT, THREAD_START, THREAD_END, THREAD_NAME, EXIT, \
    SIGNAL, SHELL_BEGIN, SHELL_END, LOST = range(1, 15)
# enum ft_key
TS, TID, PID, PPID, CHILD, PATH, ARGV, CWD, EXE, REALTIME, START_TICKS, ERRNO, STATUS, CODE, \
    SIGNO, NAME, KIND, COUNT, CMD, FLAGS, EXEC_TS = range(1, 22)
CHILD_ERRNO = 31
VERSION = 1

T0 = 5_000_000_000_000  # a monotonic time past 2^32 ns, so TS is a uint64

# (file name, message type, payload map with keys in ascending order)
VECTORS = [
    ('hello', HELLO, {TS: T0, TID: 4242, PID: 4242, PPID: 1,
                      ARGV: ['printf', '%s\n', 'h\u00e9llo'],
                      CWD: '/tmp/a directory name longer than 31 bytes',
                      EXE: '/usr/bin/printf', REALTIME: 1_700_000_000_123_456_789,
                      START_TICKS: 123456, NAME: 'printf', FLAGS: 1}),
    ('fork', FORK, {TS: T0 + 1000, TID: 4242, CHILD: 4243, KIND: 0}),
    ('vfork_exec_fail', FORK, {TS: T0 + 1500, TID: 4242, CHILD: 4246, PATH: '/nope',
                               ARGV: ['nope', 'x'], KIND: 1, EXEC_TS: T0 + 1600,
                               CHILD_ERRNO: 2}),
    ('exec', EXEC, {TS: T0 + 2000, TID: 4243, PATH: 'ls', ARGV: ['ls', '-l', '/'], KIND: 2}),
    ('exec_fail', EXEC_FAIL, {TS: T0 + 2001, TID: 4243, PATH: 'ls', ERRNO: 2}),
    ('spawn', SPAWN, {TS: T0 + 3000, TID: 4242, CHILD: 4244, PATH: 'sh',
                      ARGV: ['sh', '-c', 'exit 3'], ERRNO: 0, KIND: 3}),
    ('wait', WAIT, {TS: T0 + 4000, TID: 4242, CHILD: 4244, STATUS: 768}),
    ('thread_start', THREAD_START, {TS: T0 + 5000, TID: 4245}),
    ('thread_end', THREAD_END, {TS: T0 + 7000, TID: 4245}),
    ('thread_name', THREAD_NAME, {TS: T0 + 6000, TID: 4245, NAME: 'worker-1'}),
    ('exit', EXIT, {TS: T0 + 8000, TID: 4242, CODE: -1}),
    ('signal', SIGNAL, {TS: T0 + 9000, TID: 4242, SIGNO: 11}),
    ('shell_begin', SHELL_BEGIN, {TS: T0 + 10000, TID: 4242, KIND: 4, CMD: 'echo hi | wc -c'}),
    ('shell_end', SHELL_END, {TS: T0 + 11000, TID: 4242, STATUS: 0, KIND: 4,
                              CMD: 'echo hi | wc -c'}),
    ('lost', LOST, {TS: T0 + 12000, TID: 4242, COUNT: 70000}),
]


def frame(mtype, fields):
    payload = msgpack.packb(fields, use_bin_type=True)
    return b'FT' + struct.pack('<BBI', VERSION, mtype, len(payload)) + payload


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--check', action='store_true', help='compare instead of writing')
    ap.add_argument('--dir', default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                  'vectors'))
    args = ap.parse_args()
    bad = 0
    for name, mtype, fields in VECTORS:
        path = os.path.join(args.dir, name + '.bin')
        data = frame(mtype, fields)
        if args.check:
            try:
                with open(path, 'rb') as f:
                    have = f.read()
            except OSError as e:
                print('%s: %s' % (path, e.strerror), file=sys.stderr)
                bad += 1
                continue
            if have != data:
                print('%s: differs from the Python encoding (%d vs %d bytes)'
                      % (path, len(have), len(data)), file=sys.stderr)
                bad += 1
        else:
            with open(path, 'wb') as f:
                f.write(data)
    if args.check and not bad:
        print('%d vectors match' % len(VECTORS))
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
