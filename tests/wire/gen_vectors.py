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
    SIGNAL, SHELL_BEGIN, SHELL_END, LOST, SHM, EVENTS, MODULE, CONTINUE, REMOTE = range(1, 20)
# enum ft_key
TS, TID, PID, PPID, CHILD, PATH, ARGV, CWD, EXE, REALTIME, START_TICKS, ERRNO, STATUS, CODE, \
    SIGNO, NAME, KIND, COUNT, CMD, FLAGS, EXEC_TS, SLOT, OFFSET, TSC, DATA, ADDR, LO, HI, SIZE, \
    TABLE_SLOT, CHILD_ERRNO, RANK, LOCAL_RANK, RANK_VAR, RUSAGE, RUSAGE_CHILDREN = range(1, 37)
# enum ft_ev_type, for the records in an EVENTS frame
EV_TIME, EV_REGION_BEGIN, EV_REGION_END = 0, 3, 4
VERSION = 1

T0 = 5_000_000_000_000  # a monotonic time past 2^32 ns, so TS is a uint64
TSC0 = 0x123456789abc  # a time stamp counter value past 2^32

# Resource use (enum ft_rusage_field: user_ns, sys_ns, maxrss_kb, minflt, majflt, nvcsw,
# nivcsw, inblock, oublock) in each integer form.
RU_SELF = [1234567890123, 250000000, 204800, 51234, 3, 17, 300, 0, 8]
RU_CHILDREN = [5000000000, 120000, 4096, 70000, 0, 250, 1, 96, 65536]

# The records an EVENTS frame carries in DATA: TIME, then a region.
RECORDS = (msgpack.packb([EV_TIME, TSC0]) + msgpack.packb([EV_REGION_BEGIN, 10, 'step']) +
           msgpack.packb([EV_REGION_END, 20]))

# (file name, message type, payload map with keys in ascending order)
VECTORS = [
    ('hello', HELLO, {TS: T0, TID: 4242, PID: 4242, PPID: 1,
                      ARGV: ['printf', '%s\n', 'h\u00e9llo'],
                      CWD: '/tmp/a directory name longer than 31 bytes',
                      EXE: '/usr/bin/printf', REALTIME: 1_700_000_000_123_456_789,
                      START_TICKS: 123456, NAME: 'printf', FLAGS: 1}),
    ('hello_exec_ts', HELLO, {TS: T0 + 100, TID: 4250, PID: 4250, PPID: 4242, ARGV: ['true'],
                              CWD: '/', EXE: '/usr/bin/true',
                              REALTIME: 1_700_000_000_123_556_789, START_TICKS: 123460,
                              NAME: 'true', FLAGS: 0, EXEC_TS: T0 + 50}),
    ('hello_resumed', HELLO, {TS: T0 + 200, TID: 4250, PID: 4250, PPID: 4242, ARGV: ['true'],
                              CWD: '/', EXE: '/usr/bin/true',
                              REALTIME: 1_700_000_000_123_656_789, START_TICKS: 123460,
                              NAME: 'true', FLAGS: 4, EXEC_TS: T0 + 50, TABLE_SLOT: 17}),
    ('hello_forked_resumed', HELLO, {TS: T0 + 300, TID: 4251, PID: 4251, PPID: 4250,
                                     ARGV: ['true'], CWD: '/', EXE: '/usr/bin/true',
                                     REALTIME: 1_700_000_000_123_756_789, START_TICKS: 123470,
                                     NAME: 'true', FLAGS: 6, TABLE_SLOT: 18}),
    ('hello_rank', HELLO, {TS: T0 + 400, TID: 4260, PID: 4260, PPID: 4242, ARGV: ['./app'],
                           CWD: '/', EXE: '/tmp/app', REALTIME: 1_700_000_000_123_856_789,
                           START_TICKS: 123480, NAME: 'app', FLAGS: 0, EXEC_TS: T0 + 350,
                           RANK: 3, LOCAL_RANK: 1, RANK_VAR: 'OMPI_COMM_WORLD_RANK'}),
    ('hello_local_rank', HELLO, {TS: T0 + 500, TID: 4261, PID: 4261, PPID: 4242,
                                 ARGV: ['./app'], CWD: '/', EXE: '/tmp/app',
                                 REALTIME: 1_700_000_000_123_956_789, START_TICKS: 123490,
                                 NAME: 'app', FLAGS: 0, LOCAL_RANK: 2}),
    ('fork', FORK, {TS: T0 + 1000, TID: 4242, CHILD: 4243, KIND: 0}),
    ('fork_failed', FORK, {TS: T0 + 1100, TID: 4242, ERRNO: 11, KIND: 0}),
    ('vfork_exec', FORK, {TS: T0 + 1400, TID: 4242, CHILD: 4247, PATH: '/bin/echo',
                          ARGV: ['echo', 'hi'], KIND: 1, EXEC_TS: T0 + 1450}),
    ('vfork_exec_fail', FORK, {TS: T0 + 1500, TID: 4242, CHILD: 4246, PATH: '/nope',
                               ARGV: ['nope', 'x'], KIND: 1, EXEC_TS: T0 + 1600,
                               CHILD_ERRNO: 2}),
    ('exec', EXEC, {TS: T0 + 2000, TID: 4243, PATH: 'ls', ARGV: ['ls', '-l', '/'], KIND: 2}),
    ('exec_rusage', EXEC, {TS: T0 + 2100, TID: 4243, PATH: 'ls', ARGV: ['ls'], KIND: 2,
                           RUSAGE: RU_SELF}),
    ('exec_fail', EXEC_FAIL, {TS: T0 + 2001, TID: 4243, PATH: 'ls', ERRNO: 2}),
    ('spawn', SPAWN, {TS: T0 + 3000, TID: 4242, CHILD: 4244, PATH: 'sh',
                      ARGV: ['sh', '-c', 'exit 3'], ERRNO: 0, KIND: 3}),
    ('spawn_failed', SPAWN, {TS: T0 + 3100, TID: 4242, PATH: '/nonexistent',
                             ARGV: ['nonexistent'], ERRNO: 2, KIND: 2}),
    ('wait', WAIT, {TS: T0 + 4000, TID: 4242, CHILD: 4244, STATUS: 768}),
    ('wait_rusage', WAIT, {TS: T0 + 4100, TID: 4242, CHILD: 4248, STATUS: 9,
                           RUSAGE: RU_CHILDREN}),
    ('thread_start', THREAD_START, {TS: T0 + 5000, TID: 4245}),
    ('thread_end', THREAD_END, {TS: T0 + 7000, TID: 4245}),
    ('thread_name', THREAD_NAME, {TS: T0 + 6000, TID: 4245, NAME: 'worker-1'}),
    ('exit', EXIT, {TS: T0 + 8000, TID: 4242, CODE: -1}),
    ('exit_rusage', EXIT, {TS: T0 + 8100, TID: 4242, CODE: 0, RUSAGE: RU_SELF,
                           RUSAGE_CHILDREN: RU_CHILDREN}),
    ('signal', SIGNAL, {TS: T0 + 9000, TID: 4242, SIGNO: 11}),
    ('shell_begin', SHELL_BEGIN, {TS: T0 + 10000, TID: 4242, KIND: 4, CMD: 'echo hi | wc -c'}),
    ('shell_end', SHELL_END, {TS: T0 + 11000, TID: 4242, STATUS: 0, KIND: 4,
                              CMD: 'echo hi | wc -c'}),
    ('shell_end_failed', SHELL_END, {TS: T0 + 11500, TID: 4242, ERRNO: 24, STATUS: -1, KIND: 5,
                                     CMD: 'ls'}),
    ('lost', LOST, {TS: T0 + 12000, TID: 4242, COUNT: 70000}),
    ('continue', CONTINUE, {TS: T0 + 13000, TID: 4242, TABLE_SLOT: 17}),
    ('shm', SHM, {TS: T0 + 14000, TID: 4242, COUNT: 4, SLOT: 8, TSC: TSC0, SIZE: 65536}),
    ('events', EVENTS, {TS: T0 + 15000, TID: 4242, SLOT: 8, OFFSET: 4096, TSC: TSC0 + 5,
                        DATA: RECORDS}),
    ('module', MODULE, {TS: T0 + 16000, TID: 4242, PATH: '/usr/lib/libfoo.so',
                        ADDR: 0x7f0000000000, LO: 0x7f0000001000, HI: 0x7f0000005000}),
    ('remote', REMOTE, {TS: T0 + 17000, TID: 4270, PID: 4270,
                        PATH: '/opt/forktrace/bin/forktrace', NAME: 'user@node2', FLAGS: 0}),
    ('remote_spawn', REMOTE, {TS: T0 + 18000, TID: 4242, PID: 4242, CHILD: 4271,
                              PATH: '/opt/forktrace/bin/forktrace', NAME: 'node3', FLAGS: 1}),
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
