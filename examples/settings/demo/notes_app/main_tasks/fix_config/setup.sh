#!/bin/sh
set -e
mkdir -p /etc/notes
cat > /etc/notes/app.conf <<'CONF'
name=notes
port=80a80
storage=/var/lib/notes
CONF
