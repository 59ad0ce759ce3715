#!/usr/bin/env python3
"""What brokers receive from a NameServer with notifyMinBrokerIdChanged=true (NOTIFY_MIN_BROKER_ID_CHANGE,
905), for each trigger: test brokers listen on their registered addresses, register and leave through
NAMESRV as RocketMQ 5.x brokers do, and record every frame the NameServer sends them. Prints, per trigger,
what each broker received (code, one-way flag, header fields sorted); tests/java/min-broker-id.sh runs it
against the Java NameServer 5.3.3 and rocketns and compares. The NameServer must scan for silent brokers
every second (scanNotActiveBrokerInterval=1000).

    min_broker_id.py NAMESRV BASE_PORT

The test brokers listen on BASE_PORT to BASE_PORT+5.
"""
import os
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from remoting import Broker, read_frame  # noqa: E402

lock = threading.Condition()
received = {}  # broker address -> [frame summary]


def listen(addr):
    host, port = addr.rsplit(":", 1)
    server = socket.create_server((host, int(port)))
    received[addr] = []

    def serve(conn):
        buf = bytearray()
        while True:
            try:
                received_frame = read_frame(conn, buf)
            except OSError:
                return
            if received_frame is None:
                return
            header, _ = received_frame
            fields = sorted((header.get("extFields") or {}).items())
            summary = f"code={header['code']} oneway={bool(header.get('flag', 0) & 2)} {fields}"
            with lock:
                received[addr].append(summary)
                lock.notify_all()

    def accept():
        while True:
            conn, _ = server.accept()
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()


def wait_for(addr, count, what):
    """Until ADDR has received COUNT frames (20 s at most)."""
    deadline = time.monotonic() + 20
    with lock:
        while len(received[addr]) < count and time.monotonic() < deadline:
            lock.wait(0.1)
        if len(received[addr]) < count:
            print(f"{what}: {addr} received {len(received[addr])} frames, not {count}")


def main():
    namesrv, base = sys.argv[1], int(sys.argv[2])
    addrs = {k: f"127.0.0.1:{base + i}" for i, k in enumerate(["a0", "a1", "b0", "b1", "c0", "c1"])}
    for addr in addrs.values():
        listen(addr)
    a0 = Broker(namesrv, "broker-a", 0, addrs["a0"], True)
    a1 = Broker(namesrv, "broker-a", 1, addrs["a1"], True)
    b0 = Broker(namesrv, "broker-b", 0, addrs["b0"], False)
    b1 = Broker(namesrv, "broker-b", 1, addrs["b1"], False)
    c0 = Broker(namesrv, "broker-c", 0, addrs["c0"], True, heartbeat_ms=1000)
    c1 = Broker(namesrv, "broker-c", 1, addrs["c1"], True)
    steps = [
        ("a slave registers, then its master", lambda: (a1.register(), a0.register()), [("a1", 1)]),
        ("the master unregisters (enableActingMaster=true)", a0.unregister, [("a1", 2)]),
        ("the master registers again", a0.register, [("a1", 3)]),
        ("the master's connection closes", a0.close, [("a1", 4)]),
        ("another group: a slave registers, then its master (enableActingMaster=false)",
         lambda: (b1.register(), b0.register()), [("b1", 1)]),
        ("that master unregisters (enableActingMaster=false: no notice), then registers again",
         lambda: (b0.unregister(), b0.register()), [("b1", 2)]),
        ("a third group's master (1 s heartbeat timeout) registers after its slave, then goes silent",
         lambda: (c1.register(), c0.register()), [("c1", 2)]),
    ]
    for what, act, expected in steps:
        act()
        for key, count in expected:
            wait_for(addrs[key], count, what)
    with lock:
        for key, addr in addrs.items():
            print(f"{key} ({addr}):")
            for summary in received[addr]:
                print("   ", summary)


if __name__ == "__main__":
    main()
