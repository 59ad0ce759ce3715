#!/usr/bin/env python3
"""How long each NameServer keeps routing a topic: asks every ADDR for TOPIC's route (GET_ROUTEINFO_BY_TOPIC,
105, a JSON header as a Java client sends it) every 100 ms, from now until each answers TOPIC_NOT_EXIST (17)
or TIMEOUT seconds pass, and prints one line per ADDR: `ADDR SECONDS` or `ADDR never`
(tests/java/side-by-side.sh). A JVM per look (mqadmin) would make the times seconds coarse.

    routes_gone.py TOPIC TIMEOUT ADDR...
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from remoting import Connection  # noqa: E402

TOPIC_NOT_EXIST = 17


def route_code(addr, topic):
    conn = Connection(addr, timeout=2)
    try:
        header, _ = conn.request(105, {"topic": topic})
        return header["code"]
    finally:
        conn.close()


def main():
    topic, timeout, addrs = sys.argv[1], float(sys.argv[2]), sys.argv[3:]
    started = time.monotonic()
    gone = {}
    while len(gone) < len(addrs) and time.monotonic() - started < timeout:
        for addr in addrs:
            if addr in gone:
                continue
            try:
                if route_code(addr, topic) == TOPIC_NOT_EXIST:
                    gone[addr] = time.monotonic() - started
            except OSError:
                pass
        time.sleep(0.1)
    for addr in addrs:
        print(addr, f"{gone[addr]:.1f}" if addr in gone else "never")


if __name__ == "__main__":
    main()
