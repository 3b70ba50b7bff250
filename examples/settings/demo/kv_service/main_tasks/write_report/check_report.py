#!/usr/bin/env python3
"""Passes when /srv/reports/summary.json names the store and its health correctly."""
import json

try:
    with open("/srv/reports/summary.json") as f:
        report = json.load(f)
except FileNotFoundError:
    print("INCORRECT: no report at /srv/reports/summary.json")
    raise SystemExit(0)
except json.JSONDecodeError as e:
    print(f"INCORRECT: the report is not JSON: {e}")
    raise SystemExit(0)
print(json.dumps({"report": report}))
ok = isinstance(report, dict) and report.get("service") == "store" and report.get("healthy") is True
print("CORRECT: report is right" if ok else f"INCORRECT: unexpected report {report!r}")
