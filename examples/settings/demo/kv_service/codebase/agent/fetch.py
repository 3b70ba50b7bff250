#!/usr/bin/env python3
"""fetch URL: prints the body of an HTTP GET (the image has no curl)."""
import sys
import urllib.request

with urllib.request.urlopen(sys.argv[1], timeout=10) as r:
    sys.stdout.write(r.read().decode())
