#!/usr/bin/env python3
"""What a connection's kept header costs (src/remoting/repeated.rs): N connections each send one route
lookup whose JSON header is the largest the server keeps (1 KiB: the topic and 15 more extFields, 16 in
all, and a remark), read the reply and stay open; prints the server's RSS before and after, and the
difference per connection. Run it against two builds and subtract (perf/README.md, "A polling client's
next header read by its last"):

    ulimit -n 20000; python3 perf/kept_header.py PORT SERVER_PID 5000
"""
import json
import socket
import struct
import sys
import time

KEPT_MAX = 1024
port, pid, n = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])


def rss_kb():
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS"):
                return int(line.split()[1])


FIELDS = "".join(f'"k{i:02d}":"{"v" * 20}",' for i in range(15))
TEMPLATE = ('{"code":105,"extFields":{%s"topic":"T%07d"},"flag":0,"language":"JAVA","opaque":%d,'
            '"remark":"%s","serializeTypeCurrentRPC":"JSON","version":479}')


def header(i):
    pad = KEPT_MAX - len(TEMPLATE % (FIELDS, i, i, ""))
    return (TEMPLATE % (FIELDS, i, i, "r" * pad)).encode()


assert len(header(1)) == KEPT_MAX
time.sleep(0.5)
before = rss_kb()
socks = []
for i in range(n):
    s = socket.create_connection(("127.0.0.1", port))
    h = header(i)
    s.sendall(struct.pack(">II", 4 + len(h), len(h)) + h)
    socks.append(s)
for s in socks:
    length = struct.unpack(">I", s.recv(4, socket.MSG_WAITALL))[0]
    s.recv(length, socket.MSG_WAITALL)
time.sleep(1.0)
after = rss_kb()
print(json.dumps({"connections": n, "rss_before_kb": before, "rss_after_kb": after,
                  "per_connection_bytes": (after - before) * 1024 // n}))
