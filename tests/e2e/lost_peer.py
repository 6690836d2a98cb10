"""Run under forktrace: speaks for its own process on a connection of its
own, as an agent would (HELLO, resumed), and reports lost events with
counts whose sum wraps around 64 bits: 2^63, 2^63, then 5."""
import os
import socket
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ftcheck import agent_var  # noqa: E402


def mp_map(pairs):
    out = bytes([0x80 | len(pairs)])
    for k, v in pairs:
        out += bytes([k]) + b"\xcf" + struct.pack(">Q", v)
    return out


def frame(mtype, payload):
    return b"FT\x01" + bytes([mtype]) + struct.pack("<I", len(payload)) + payload




with open("/proc/self/stat") as f:
    ticks = int(f.read().rsplit(")", 1)[1].split()[19])
pid = os.getpid()
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(agent_var("FORKTRACE_SOCK"))
ts = 1
data = frame(1, mp_map([(1, ts), (2, pid), (3, pid), (4, os.getppid()), (11, ticks),
                        (20, 0x4)]))
for count in (1 << 63, 1 << 63, 5):
    data += frame(14, mp_map([(1, ts), (2, pid), (18, count)]))
s.sendall(data)
s.close()
print("lost peer done")
