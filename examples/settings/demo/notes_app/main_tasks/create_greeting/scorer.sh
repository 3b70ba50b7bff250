#!/bin/sh
# Passes when /app/greeting.txt holds exactly "hello, notes".
f=/app/greeting.txt
if [ ! -f "$f" ]; then
  echo "INCORRECT: $f does not exist"
  exit 0
fi
content=$(cat "$f")
printf '{"bytes": %s}\n' "$(wc -c < "$f")"
if [ "$content" = "hello, notes" ]; then
  echo "CORRECT: greeting file has the expected contents"
else
  echo "INCORRECT: greeting file holds '$content'"
fi
