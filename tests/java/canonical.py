#!/usr/bin/env python3
"""Puts an mqadmin output in a form where only what a user reads is compared (tests/java/side-by-side.sh).

JSON (fastjson's pretty form, bare numeric keys included) is printed parsed, keys and arrays sorted: Java's
HashMaps order brokers in routes (COMPATIBILITY.md, hashmap-order). Other text is printed with its lines
sorted, for the same reason (clusterList, getNamesrvConfig)."""
import json
import re
import sys


def canon(value):
    if isinstance(value, list):
        return sorted((canon(v) for v in value), key=lambda v: json.dumps(v, sort_keys=True))
    if isinstance(value, dict):
        return {k: canon(v) for k, v in value.items()}
    return value


if __name__ == "__main__":
    text = sys.stdin.read()
    try:
        parsed = json.loads(re.sub(r'([{,]\s*)(-?\d+):', lambda m: m.group(1) + '"' + m.group(2) + '":', text))
    except ValueError:
        sys.stdout.write("".join(sorted(text.splitlines(keepends=True))))
    else:
        print(json.dumps(canon(parsed), sort_keys=True, indent=1))
