#!/usr/bin/env python3
"""Passes when /etc/notes/app.conf has port=8080 and keeps name and storage."""
import json
import os

path = "/etc/notes/app.conf"
if not os.path.exists(path):
    print("NOT_READY: the config file is missing; setup did not run")
    raise SystemExit(0)
conf = {}
with open(path) as f:
    for line in f:
        line = line.strip()
        if "=" in line:
            k, v = line.split("=", 1)
            conf[k.strip()] = v.strip()
print(json.dumps({"config": conf}))
if conf.get("port") != "8080":
    print(f"INCORRECT: port is {conf.get('port')!r}, expected '8080'")
elif conf.get("name") != "notes" or conf.get("storage") != "/var/lib/notes":
    print("INCORRECT: other settings were changed")
else:
    print("CORRECT: port fixed and other settings intact")
