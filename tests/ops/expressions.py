#!/usr/bin/env python3
"""Runs every expression of the Prometheus rules and of the Grafana dashboard through a live Prometheus's HTTP
API, and fails on any that errs or returns no data (a misspelt metric or label, an expression that is always
empty). For tests/ops/prometheus.sh:

    expressions.py PROMETHEUS_URL RULES_YML DASHBOARD_JSON

An alert's expression is checked without its final comparison (`signal > threshold`): each side that is not
a number must have data; whether it crosses the threshold is what `promtool test rules` tests. The dashboard's Grafana
variables are replaced as Grafana would on its defaults: `$__rate_interval` by 1m, `$instance` by `.*`. The
rules' own evaluation is checked too: every rule Prometheus loaded reports health "ok".
"""
import json
import re
import sys
import urllib.parse
import urllib.request

COMPARISONS = ("==", "!=", ">=", "<=", ">", "<")


def query(url, expr):
    with urllib.request.urlopen(f"{url}/api/v1/query?" + urllib.parse.urlencode({"query": expr}), timeout=30) as r:
        return json.load(r)


def sides(expr):
    """The expressions either side of the last top-level comparison (the right one unless it is a number),
    or the whole expression."""
    depth, cut = 0, None
    i = 0
    while i < len(expr):
        c = expr[i]
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == '"':
            i = expr.index('"', i + 1)
        elif depth == 0:
            for op in COMPARISONS:
                if expr.startswith(op, i) and not expr.startswith("=~", i):
                    cut = i
                    i += len(op) - 1
                    break
        i += 1
    if cut is None:
        return [expr]
    left, right = expr[:cut].strip(), expr[cut:].lstrip("=!<>").strip()
    return [left] if re.fullmatch(r"[0-9.e+-]+", right) else [left, right]


def rule_expressions(path):
    """(name, expression to run) of each rule; every `expr:` is on one line (the rules file says so)."""
    out, name = [], None
    for line in open(path):
        m = re.match(r"\s*- (?:record|alert): (\S+)", line)
        if m:
            name = m.group(1)
        m = re.match(r"\s*expr: (.+)$", line)
        if m:
            expr = m.group(1).strip()
            if name.startswith("rocketns:"):
                out.append((name, expr))
            else:
                out.extend((name, side) for side in sides(expr))
    return out


def dashboard_expressions(path):
    out = []
    for panel in json.load(open(path))["panels"]:
        for target in panel.get("targets", []):
            expr = target["expr"].replace("$__rate_interval", "1m").replace("$instance", ".*")
            out.append((f'{panel["title"]} / {target.get("legendFormat", target["refId"])}', expr))
    return out


def main():
    url, rules, dashboard = sys.argv[1:4]
    failed = 0
    checks = rule_expressions(rules) + dashboard_expressions(dashboard)
    for name, expr in checks:
        try:
            answer = query(url, expr)
            series = len(answer["data"]["result"]) if answer.get("status") == "success" else 0
            problem = None if series else f"no data ({answer.get('error', 'empty result')})"
        except Exception as e:  # noqa: BLE001 - an HTTP error is the expression's failure
            series, problem = 0, f"error: {e}"
        print(f"{'ok ' if problem is None else 'BAD'} {series:3d} series  {name}: {expr}" + (f"  <- {problem}" if problem else ""))
        failed += problem is not None
    with urllib.request.urlopen(f"{url}/api/v1/rules", timeout=30) as r:
        loaded = [rule for group in json.load(r)["data"]["groups"] for rule in group["rules"]]
    unhealthy = [f'{r["name"]}: {r.get("lastError")}' for r in loaded if r.get("health") != "ok"]
    for u in unhealthy:
        print(f"BAD rule evaluation {u}")
    expected = len(set(name for name, _ in rule_expressions(rules)))
    if len(loaded) != expected:
        print(f"BAD Prometheus loaded {len(loaded)} rules, the file has {expected}")
        failed += 1
    failed += len(unhealthy)
    print(f"expressions: {len(checks) - failed if failed <= len(checks) else 0} of {len(checks)} return data; "
          f"{len(loaded)} rules loaded, {len(unhealthy)} unhealthy")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
