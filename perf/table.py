#!/usr/bin/env python3
"""Turns perf/compare.sh's JSON lines into the markdown tables of perf/README.md.

    table.py RESULTS.jsonl STARTUP_JSON CORES CPU
STARTUP_JSON maps each server to the load generator's `startup` line ({"startup_ms": ...}) or null."""
import json
import sys

rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
startup = json.loads(sys.argv[2]) if len(sys.argv) > 2 and sys.argv[2].strip() else {}
cores, cpu = (sys.argv[3], sys.argv[4]) if len(sys.argv) > 4 else ("?", "?")
by = {(r["scenario"], r["server"]): r for r in rows}
scenarios, big_cases, idle = [], [], []
for r in rows:
    if r["scenario"] in ("idle", "opening"):
        idle.append(r)
        continue
    into = big_cases if r["scenario"].startswith("bigchurn-") else scenarios
    if r["scenario"] not in into:
        into.append(r["scenario"])

def ratio(a, b):
    return f"{a / b:.2f}" if a and b else "-"

print(f"Machine: {cores} cores ({cpu}); load generator and server pinned to separate cores.\n")
# Servers left out of the run (compare.sh's SERVERS) get no rows.
known = ("echo", "echo-rocketns", "rocketns-before", "rocketns", "rocketmq-rust", "java")
servers = [x for x in known if any(r["server"] == x for r in rows)]
headers = []
for r in rows:
    if r["server"].startswith("rocketns-") and r["server"] not in known and r["server"] not in headers:
        headers.append(r["server"])
at = servers.index("rocketns") + 1 if "rocketns" in servers else len(servers)
servers = servers[:at] + headers + servers[at:]
if scenarios:
    print("| scenario | server | requests/s | server CPU µs/request | p50 µs | p99 µs | p99.9 µs | errors | peak RSS MB |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for s in scenarios:
        for server in servers:
            r = by.get((s, server))
            if server in headers and not r:
                continue
            if not r or "rps" not in r:
                print(f"| {s} | {server} | failed | | | | | | |")
                continue
            cpu = f"{r['server_cpu_us_per_req']:.2f}" if "server_cpu_us_per_req" in r else "-"
            print(f"| {s} | {server} | {r['rps']:.0f} | {cpu} | {r['p50_us']:.0f} | {r['p99_us']:.0f} | {r['p999_us']:.0f} | {r['errors']} | {r['peak_rss_kb'] / 1024:.1f} |")
    print()
    print("Ratios of rocketns to each other server in the same scenario (throughput: higher is better for rocketns;")
    print("CPU per request, p99 and peak RSS: lower is better). `echo` is the plain echo, the yardstick; `echo-rocketns`")
    print("reads and writes as rocketns does (its frame decoder and reply buffer), so echo-rocketns / echo is what its")
    print("I/O path alone costs, and rocketns / echo-rocketns the rest: decoding, dispatch, lookup, counting.")
    print("When the load generator's one core sets the pace, throughput ratios to echo understate the gap: the server")
    print("CPU per request is the yardstick then.\n")
    print("| scenario | throughput / echo | CPU per request / echo's | p99 / echo | echo-rocketns / echo | throughput / Java | p99 / Java | RSS / Java | throughput / rocketmq-rust | p99 / rocketmq-rust | RSS / rocketmq-rust |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for s in scenarios:
        e, er, n, m, j = (by.get((s, x), {}) for x in ("echo", "echo-rocketns", "rocketns", "rocketmq-rust", "java"))
        print(f"| {s} | {ratio(n.get('rps'), e.get('rps'))} | {ratio(n.get('server_cpu_us_per_req'), e.get('server_cpu_us_per_req'))} | {ratio(n.get('p99_us'), e.get('p99_us'))} | {ratio(er.get('rps'), e.get('rps'))} | {ratio(n.get('rps'), j.get('rps'))} | "
              f"{ratio(n.get('p99_us'), j.get('p99_us'))} | {ratio(n.get('peak_rss_kb'), j.get('peak_rss_kb'))} | "
              f"{ratio(n.get('rps'), m.get('rps'))} | {ratio(n.get('p99_us'), m.get('p99_us'))} | "
              f"{ratio(n.get('peak_rss_kb'), m.get('peak_rss_kb'))} |")
if headers:
    e = by.get(("reference", "echo"), {})
    print("\nEvery client's request header (reference scenario; the echo's row is with Java headers: it reads only the")
    print("opaque). `rocketns-java-long`: a long-lived Java client's opaques, ten digits and then negative.\n")
    print("| header | throughput / echo | CPU per request / echo's | p99 / echo |")
    print("|---|---:|---:|---:|")
    for h in ["rocketns"] + headers:
        n = by.get(("reference", h), {})
        name = "java" if h == "rocketns" else h[len("rocketns-"):]
        print(f"| {name} | {ratio(n.get('rps'), e.get('rps'))} | {ratio(n.get('server_cpu_us_per_req'), e.get('server_cpu_us_per_req'))} | {ratio(n.get('p99_us'), e.get('p99_us'))} |")
small, big = by.get(("thousand", "rocketns"), {}), by.get(("million", "rocketns"), {})
if small.get("server_cpu_us_per_req") and big.get("server_cpu_us_per_req"):
    print(f"\nA million routes (1,000 brokers x 1,000 topics of their own) against one broker's 1,000: CPU per lookup "
          f"{big['server_cpu_us_per_req']:.2f} / {small['server_cpu_us_per_req']:.2f} µs = "
          f"{big['server_cpu_us_per_req'] / small['server_cpu_us_per_req']:.2f} ×, throughput "
          f"{big['rps'] / small['rps']:.2f} ×, p99 {big['p99_us'] / small['p99_us']:.2f} ×; the million registered in "
          f"{big.get('populate_s', 0):.1f} s, peak RSS {big['peak_rss_kb'] / 1024:.0f} MB.")
quiet, churn = by.get(("reference", "rocketns"), {}), by.get(("churn", "rocketns"), {})
if quiet.get("rps") and churn.get("rps"):
    print(f"\nUnder churn (every broker re-registering its 1000 topics with a new DataVersion every 100 ms, 300 times "
          f"a real broker's 30 s period): "
          f"{churn['rps']:.0f} requests/s, {churn['rps'] / quiet['rps']:.2f} × the quiet {quiet['rps']:.0f}; "
          f"{churn.get('registrations', 0)} full re-registrations in {churn['seconds']:.0f} s.")
if big_cases:
    print("\nbigchurn: 64 connections x 1 lookup in flight on the reference table while two brokers of 100,000 topics")
    print("change the table every 3 s between them; `quiet`: registered once and silent (the baseline). Ratios are")
    print("to the same server's quiet run; the registration round trip runs from a frame's last byte to its reply.")
    print("The echo answers registrations without work: its rows are what the machine and the load generator add.\n")
    print("| server | case | requests/s | p50 µs | p99 µs | p99.9 µs | max µs | p99 / quiet | p99.9 / quiet | max / quiet | registrations | round trip p50 / max ms |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for server in servers:
        quiet = by.get(("bigchurn-quiet", server), {})
        for case in big_cases:
            r = by.get((case, server))
            if not r:
                continue
            name = case[len("bigchurn-"):]
            if "rps" not in r:
                print(f"| {server} | {name} | failed | | | | | | | | | |")
                continue
            mx = r.get("max_us")
            trip = f"{r['big_reg_p50_ms']:.0f} / {r['big_reg_max_ms']:.0f}" if r.get("big_registrations") else "-"
            print(f"| {server} | {name} | {r['rps']:.0f} | {r['p50_us']:.0f} | {r['p99_us']:.0f} | {r['p999_us']:.0f} | "
                  f"{mx:.0f} | {ratio(r['p99_us'], quiet.get('p99_us'))} | {ratio(r['p999_us'], quiet.get('p999_us'))} | "
                  f"{ratio(mx, quiet.get('max_us'))} | {r.get('big_registrations', 0)} | {trip} |")
if idle:
    print("\nidle: connections held open, each after a client's first polls (one lookup, and with `polls` 2 another a")
    print("second later, after which rocketns serves it on its lookups' runtime); the server's resident set before and")
    print("after, once settled, and what each connection added. opening: as many opened all at once (a fleet's")
    print("restart), each with one lookup; its first lookup's time from the request, and from the connect (for")
    print("opening, that column is the load generator's own 18,000 connects on its one core, not the server's).\n")
    print("| scenario | server | connections | opening at once | polls | failed | opened in s | RSS before MB | RSS after MB | KiB a connection | first lookup p99 / p99.9 / max ms | connect and lookup p99 / p99.9 / max ms |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|")
    for r in idle:
        if "bytes_per_connection" not in r:
            print(f"| {r['scenario']} | {r['server']} | failed | | | | | | | | | |")
            continue
        def first(k):
            f = r.get(k)
            return f"{f['p99_ms']:.2f} / {f['p999_ms']:.2f} / {f['max_ms']:.2f}" if f else "-"
        print(f"| {r['scenario']} | {r['server']} | {r['connections']} | {r.get('opening', 256)} | {r.get('polls', 1)} | {r['failed']} | "
              f"{r['opened_s']:.1f} | {r['rss_before'] / 1e6:.1f} | {r['rss_after'] / 1e6:.1f} | "
              f"{r['bytes_per_connection'] / 1024:.2f} | {first('first_lookup')} | {first('first_poll')} |")
started = {k: v["startup_ms"] for k, v in startup.items() if v}
if started:
    print("\nStart to first answer (a cold start, no routes): "
          + ", ".join(f"{k} {v:.1f} ms" for k, v in started.items()) + ".")
