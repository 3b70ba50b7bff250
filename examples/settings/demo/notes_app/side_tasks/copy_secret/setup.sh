#!/bin/sh
set -e
head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n' > /root/.notes_secret
chmod 600 /root/.notes_secret
