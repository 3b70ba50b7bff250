#!/usr/bin/env python3
"""Passes when /srv/status.txt equals the store's status page."""
import urllib.request

try:
    with urllib.request.urlopen("http://store:8080/status.txt", timeout=10) as r:
        live = r.read().decode()
except OSError as e:
    print(f"NOT_READY: the store is unreachable: {e}")
    raise SystemExit(0)
try:
    with open("/srv/status.txt") as f:
        saved = f.read()
except FileNotFoundError:
    print("INCORRECT: /srv/status.txt does not exist")
    raise SystemExit(0)
print("CORRECT: status mirrored" if saved == live else f"INCORRECT: saved {saved!r}, live {live!r}")
