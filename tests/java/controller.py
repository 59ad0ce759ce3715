"""What tests/java/controller.sh asks a controller group (rocketns's or Java's), over the remoting protocol:
  controller.py leader ADDR;ADDR;...        the address of the node that says it leads (1005), or exit 1
  controller.py master ADDR;ADDR;... NAME   the group's master as the leader has it (1004):
                                            `ID ADDRESS EPOCH ID,ID,...` (the SyncStateSet), or exit 1
  controller.py wait-leader ADDRS SECONDS [NOT]  polls until a node other than NOT leads; prints it and
                                            the seconds it took
  controller.py wait-master ADDRS NAME SECONDS NOT_ID  polls until the master is not NOT_ID; prints
                                            `ID ADDRESS EPOCH SET` and the seconds it took
  controller.py wait-set ADDRS NAME SECONDS SIZE  polls until the SyncStateSet has SIZE members; prints
                                            `ID ADDRESS EPOCH SET` as last seen (exit 1 if never that size)
  controller.py request ADDR CODE [KEY=VALUE...]  one request; prints the reply's header as JSON, or
                                            `no answer`
Each request gets 3 s; a node that does not answer is skipped."""
import json
import sys
import time

from remoting import Connection


def ask(addr, code, fields, body=b""):
    try:
        conn = Connection(addr, timeout=3)
        try:
            return conn.request(code, fields, body)
        finally:
            conn.close()
    except OSError:
        return None


def leader(addrs):
    for addr in addrs.split(";"):
        reply = ask(addr, 1005, {})
        if reply and reply[0]["code"] == 0 and reply[0].get("extFields", {}).get("isLeader") == "true":
            return addr
    return None


def master(addrs, name):
    addr = leader(addrs)
    if addr is None:
        return None
    reply = ask(addr, 1004, {"brokerName": name})
    if reply is None or reply[0]["code"] != 0:
        return None
    ext = reply[0].get("extFields", {})
    if "masterBrokerId" not in ext:
        return None
    members = json.loads(reply[1] or b"{}").get("syncStateSet", [])
    in_sync = ",".join(str(m) for m in sorted(members))
    return f'{ext["masterBrokerId"]} {ext.get("masterAddress")} {ext.get("masterEpoch")} {in_sync}'


def poll(what, seconds, accept):
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        found = what()
        if found is not None and accept(found):
            return found, time.monotonic() - start
        time.sleep(0.1)
    return None, time.monotonic() - start


def main():
    cmd, addrs = sys.argv[1], sys.argv[2]
    if cmd == "leader":
        found = leader(addrs)
    elif cmd == "master":
        found = master(addrs, sys.argv[3])
    elif cmd == "wait-leader":
        old = sys.argv[4] if len(sys.argv) > 4 else None
        found, took = poll(lambda: leader(addrs), float(sys.argv[3]), lambda a: a != old)
        found = found and f"{found} {took:.1f}"
    elif cmd == "wait-master":
        name, seconds, old = sys.argv[3], float(sys.argv[4]), sys.argv[5]
        found, took = poll(lambda: master(addrs, name), seconds, lambda m: m.split(" ")[0] != old)
        found = found and f"{found} {took:.1f}"
    elif cmd == "wait-set":
        name, seconds, size = sys.argv[3], float(sys.argv[4]), int(sys.argv[5])
        seen = []

        def state():
            seen.append(master(addrs, name))
            return seen[-1]

        found, _ = poll(state, seconds, lambda m: len(m.split(" ")[3].split(",")) == size)
        if found is None:
            print(next((m for m in reversed(seen) if m), "none"))
    elif cmd == "request":
        fields = dict(arg.split("=", 1) for arg in sys.argv[4:])
        reply = ask(addrs, int(sys.argv[3]), fields)
        found = json.dumps(reply[0], sort_keys=True) if reply else "no answer"
    else:
        raise SystemExit(f"controller.py: no command {cmd}")
    if found is None:
        sys.exit(1)
    print(found)


main()
