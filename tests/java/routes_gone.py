#!/usr/bin/env python3
"""How long each NameServer keeps routing a topic: asks every ADDR for TOPIC's route (GET_ROUTEINFO_BY_TOPIC,
105, a JSON header as a Java client sends it) every 100 ms, from now until each answers TOPIC_NOT_EXIST (17)
or TIMEOUT seconds pass, and prints one line per ADDR: `ADDR SECONDS` or `ADDR never`
(tests/java/side-by-side.sh). A JVM per look (mqadmin) would make the times seconds coarse.

    routes_gone.py TOPIC TIMEOUT ADDR...
"""
import json
import socket
import struct
import sys
import time

TOPIC_NOT_EXIST = 17


def route_code(addr, topic, opaque):
    host, port = addr.rsplit(":", 1)
    header = json.dumps({"code": 105, "language": "JAVA", "version": 453, "opaque": opaque, "flag": 0,
                         "extFields": {"topic": topic}}).encode()
    with socket.create_connection((host, int(port)), timeout=2) as s:
        s.sendall(struct.pack(">II", 4 + len(header), len(header)) + header)
        data = b""
        while len(data) < 8:
            chunk = s.recv(65536)
            if not chunk:
                raise ConnectionError("closed")
            data += chunk
        total, header_len = struct.unpack(">II", data[:8])
        header_len &= 0xFFFFFF
        while len(data) < 8 + header_len:
            chunk = s.recv(65536)
            if not chunk:
                raise ConnectionError("closed")
            data += chunk
        return json.loads(data[8:8 + header_len])["code"]


def main():
    topic, timeout, addrs = sys.argv[1], float(sys.argv[2]), sys.argv[3:]
    started = time.monotonic()
    gone = {}
    opaque = 0
    while len(gone) < len(addrs) and time.monotonic() - started < timeout:
        for addr in addrs:
            if addr in gone:
                continue
            opaque += 1
            try:
                if route_code(addr, topic, opaque) == TOPIC_NOT_EXIST:
                    gone[addr] = time.monotonic() - started
            except OSError:
                pass
        time.sleep(0.1)
    for addr in addrs:
        print(addr, f"{gone[addr]:.1f}" if addr in gone else "never")


if __name__ == "__main__":
    main()
