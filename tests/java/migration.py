#!/usr/bin/env python3
"""NameServer requests for tests/java/migration.sh (the remoting protocol of remoting.py):

    migration.py brokers ADDR SECONDS NAME...        until ADDR's cluster info (106) names every broker NAME;
                                                     exits 1 after SECONDS
    migration.py routed ADDR SECONDS TOPIC...        until ADDR routes every TOPIC (105 SUCCESS) on both
                                                     brokers, broker-a and broker-b; exits 1 after SECONDS
    migration.py new-node ADDR SECONDS KILLED TOPIC...
                                                     prints "watching", waits until the file KILLED exists
                                                     (the old node killed), then until something listens on
                                                     ADDR (the new node's port opening; at once for a node
                                                     that waited for the port), then asks every TOPIC's route
                                                     (105) in rounds, 50 ms apart, and prints one line:
                                                     `routed_ms=N complete_ms=N first_round=yes|no`: from the
                                                     port opening until every TOPIC answered SUCCESS, until
                                                     every route named both brokers, and whether the first
                                                     round already had every route complete (`never` for a
                                                     time not reached within SECONDS of the start)
    migration.py compare NEW PEER                    NEW's answers to the cluster info (106), the topic list
                                                     (206) and every listed topic's route (105) against PEER's,
                                                     the request the same for both: the reply's code and the
                                                     body's bytes. Prints a line per request (same, or how it
                                                     differs, with both bodies when they do), then
                                                     `compared N: identical I, order-only O, content C`;
                                                     order-only: the same when parsed, objects as maps and
                                                     arrays as sets (COMPATIBILITY.md, hashmap-order)
"""
import json
import os
import re
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from canonical import canon  # noqa: E402
from remoting import Connection  # noqa: E402

BROKERS = ("broker-a", "broker-b")


def listening(addr):
    host, port = addr.rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=1).close()
        return True
    except OSError:
        return False


def routes(conn, topics):
    """Whether every topic answered SUCCESS, and whether every route named both brokers."""
    routed = complete = True
    for topic in topics:
        header, body = conn.request(105, {"topic": topic})
        if header["code"] != 0:
            routed = complete = False
        elif not all(f'"brokerName":"{b}"' in body.decode() for b in BROKERS):
            complete = False
    return routed, complete


def until(deadline, check, pause=0.2):
    while time.monotonic() < deadline:
        try:
            if check():
                return True
        except OSError:
            pass
        time.sleep(pause)
    return False


def parsed(body):
    """The body parsed (fastjson's bare numeric keys quoted), or None."""
    try:
        return canon(json.loads(re.sub(r'([{,])(-?\d+):', r'\1"\2":', body.decode())))
    except ValueError:
        return None


def main():
    command, addr, args = sys.argv[1], sys.argv[2], sys.argv[3:]
    if command == "brokers":
        deadline = time.monotonic() + float(args[0])

        def named():
            _, body = Connection(addr, timeout=3).request(106, {})
            return all(f'"brokerName":"{b}"' in body.decode() for b in args[1:])

        sys.exit(0 if until(deadline, named) else 1)
    elif command == "routed":
        deadline, topics = time.monotonic() + float(args[0]), args[1:]
        sys.exit(0 if until(deadline, lambda: routes(Connection(addr, timeout=3), topics)[1]) else 1)
    elif command == "new-node":
        start, killed, topics = time.monotonic(), args[1], args[2:]
        deadline = start + float(args[0])
        print("watching", flush=True)
        until(deadline, lambda: os.path.exists(killed), 0.005)
        if not until(deadline, lambda: listening(addr), 0.005):
            print("routed_ms=never complete_ms=never first_round=no (the port never opened)", flush=True)
            return
        opened = time.monotonic()
        routed_ms = complete_ms = None
        first = None
        conn = None
        while time.monotonic() < deadline and complete_ms is None:
            try:
                conn = conn or Connection(addr, timeout=3)
                routed, complete = routes(conn, topics)
            except OSError:
                conn, routed, complete = None, False, False
            ms = round((time.monotonic() - opened) * 1000)
            first = complete if first is None else first
            if routed and routed_ms is None:
                routed_ms = ms
            if complete:
                complete_ms = ms
            else:
                time.sleep(0.05)
        print(f"routed_ms={'never' if routed_ms is None else routed_ms} "
              f"complete_ms={'never' if complete_ms is None else complete_ms} "
              f"first_round={'yes' if first else 'no'}", flush=True)
    elif command == "compare":
        peer = args[0]
        new_conn, peer_conn = Connection(addr, timeout=5), Connection(peer, timeout=5)
        _, listed = peer_conn.request(206, {})
        topics = sorted(json.loads(listed)["topicList"])
        requests = [("106 cluster info", 106, {}), ("206 topic list", 206, {})]
        requests += [(f"105 route of {t}", 105, {"topic": t}) for t in topics]
        identical = order_only = content = 0
        for what, code, fields in requests:
            new_header, new_body = new_conn.request(code, fields)
            peer_header, peer_body = peer_conn.request(code, fields)
            if new_header["code"] == peer_header["code"] and new_body == peer_body:
                identical += 1
                print(f"same: {what} (code {new_header['code']}, {len(new_body)} bytes)")
                continue
            if new_header["code"] == peer_header["code"] and parsed(new_body) is not None \
                    and parsed(new_body) == parsed(peer_body):
                order_only += 1
                print(f"ORDER ONLY: {what}: the same when parsed, objects as maps and arrays as sets; "
                      f"not the same bytes")
            else:
                content += 1
                print(f"DIFFERENT: {what}: code {new_header['code']} (new) and {peer_header['code']} (peer)")
            print(f"    new:  {new_body.decode(errors='replace')}")
            print(f"    peer: {peer_body.decode(errors='replace')}")
        print(f"compared {len(requests)}: identical {identical}, order-only {order_only}, content {content}")


if __name__ == "__main__":
    main()
