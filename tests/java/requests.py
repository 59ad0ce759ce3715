#!/usr/bin/env python3
"""Requests to a NameServer for the Java stages (tests/java/cluster-test.sh, tests/java/proxy.sh), quicker
than mqadmin's JVM a command:

    requests.py broker NAMESRV NAME ADDR TOPIC...   register broker NAME at ADDR routing TOPICs, print
                                                        "registered", and stay (the broker stays registered)
                                                        until killed
    requests.py kv NAMESRV NAMESPACE KEY VALUE      PUT_KV_CONFIG
    requests.py lookups NAMESRV TOPIC...            GET_ROUTEINFO_BY_TOPIC of each TOPIC, as a 5.x client
                                                        sends it: its code, remark and body
    requests.py others NAMESRV                      the codes of REGISTER_BROKER (a broker of its own)
                                                        and GET_BROKER_CLUSTER_INFO
    requests.py brokers NAMESRV                         the broker names of its cluster info, one a line
    requests.py config NAMESRV KEY=VALUE                UPDATE_NAMESRV_CONFIG
"""
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from remoting import Broker, Connection  # noqa: E402


def main():
    command, namesrv, args = sys.argv[1], sys.argv[2], sys.argv[3:]
    if command == "broker":
        broker = Broker(namesrv, args[0], 0, args[1], False)
        broker.register(args[2:])
        print("registered", flush=True)
        while True:
            time.sleep(3600)
    elif command == "config":
        header, _ = Connection(namesrv).request(318, {}, args[0].encode())
        if header["code"] != 0:
            raise SystemExit(f"UPDATE_NAMESRV_CONFIG failed: {header}")
    elif command == "kv":
        header, _ = Connection(namesrv).request(100, {"namespace": args[0], "key": args[1], "value": args[2]})
        if header["code"] != 0:
            raise SystemExit(f"PUT_KV_CONFIG failed: {header}")
    elif command == "lookups":
        conn = Connection(namesrv)
        for topic in args:
            header, body = conn.request(105, {"topic": topic})
            print(f"{topic}: code={header['code']} remark={header.get('remark')!r}")
            print(f"    {body.decode()}")
    elif command == "brokers":
        header, body = Connection(namesrv).request(106, {})
        if header["code"] != 0:
            raise SystemExit(f"GET_BROKER_CLUSTER_INFO failed: {header}")
        # fastjson writes the broker table's numeric keys bare; the names are all this needs.
        for name in sorted(set(re.findall(r'"brokerName":"([^"]*)"', body.decode()))):
            print(name)
    elif command == "others":
        broker = Broker(namesrv, "broker-other", 0, "127.0.0.1:40999", False)
        broker.check = False
        header = broker.register(["OTHER1", "OTHER2"])
        print(f"REGISTER_BROKER: code={header['code']} remark={header.get('remark')!r}")
        header, _ = Connection(namesrv).request(106, {})
        print(f"GET_BROKER_CLUSTER_INFO: code={header['code']} remark={header.get('remark')!r}")

if __name__ == "__main__":
    main()
