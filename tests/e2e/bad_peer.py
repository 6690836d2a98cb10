"""Run under forktrace: starts three /bin/true children, then, from its
own process, opens extra connections to the collector's socket and sends
what a broken or hostile peer would: bytes that are not a frame, a frame
announcing a payload over the limit, a HELLO whose payload is not msgpack,
and a message before any HELLO. Prints the pid the collector will name."""
import os
import socket
import struct
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ftcheck import agent_var  # noqa: E402



for _ in range(3):
    subprocess.run(["/bin/true"], check=True)

path = agent_var("FORKTRACE_SOCK")
payloads = [
    b"GET / HTTP/1.0\r\n\r\n",
    b"FT\x01\x01" + struct.pack("<I", 0x7FFFFFFF),
    b"FT\x01\x01" + struct.pack("<I", 4) + b"\xc1\xc1\xc1\xc1",
    b"FT\x01\x0a" + struct.pack("<I", 3) + b"\x81\x0e\x00",
]
for data in payloads:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    s.sendall(data)
    # The collector closes the connection: reading sees the end.
    s.settimeout(10)
    assert s.recv(16) == b""
    s.close()
print(f"bad peer {os.getpid()} done")
