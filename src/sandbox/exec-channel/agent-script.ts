/**
 * The program that runs inside a sandbox as one exec channel: `sh -c CHANNEL_AGENT sh [file]`,
 * started with `docker exec -i` (`file` forces the file mode for stdout, see below). It needs only a POSIX sh plus cat, head, tail, mkfifo, mktemp, rm and
 * /proc (busybox is enough); `setsid` and `dd` are used when present. Variables and functions
 * are named `ct_*` so they cannot meet a command's own (the host refuses env names `ct_*`).
 *
 * Protocol (version 1). The channel's stderr carries the agent's control lines (its own ASCII)
 * and counted stderr payloads; its stdout carries nothing but the commands' stdout bytes, in
 * order. Each stream keeps its own order, so counts are enough to split them: user bytes are
 * never scanned for markers.
 *
 *   agent -> host  `H 1 <agent pid> <setsid path or -> <stream|file>`   ready
 *                  `E <reason>`                            cannot run here (then it exits)
 *   host -> agent  `<id> <cap> <stdin bytes> <script bytes>\n`, then the script: one line when
 *                  <script bytes> is 0, else that many bytes; then the stdin bytes.
 *                  The script is sh built by the host from single-quoted words only:
 *                  `set -- ARGV;[cd -- DIR 2>/dev/null||ct_f;]ct_u;[export K=V;]...`
 *   agent -> host  `F <id>`                  the command could not start (cwd or command not
 *                                            found): the host runs it with plain docker exec
 *                  `P <id> <pid> <r1> <r2>`  started: the command's pid (its process group
 *                                            when setsid exists) and the two output readers
 *                  `X <id> <exit code>`      the command exited; its output may still drain
 *                  `R <id> <rc> <out total> <out sent> <err total> <err sent>`, then the last
 *                  <err sent> bytes of stderr and `Z <id>`; meanwhile the last <out sent> bytes
 *                  of stdout arrive on stdout. `?` for both out counts when the stdout reader
 *                  died uncounted: the agent then exits, and the call's stdout is whatever
 *                  came before the end of the stream.
 *
 * One request at a time per agent, and the host sends the next one only after the previous
 * answer: so `head -c` may read stdin payloads even where it buffers (busybox), as nothing
 * else is in the pipe.
 *
 * Per call the command runs in a fresh subshell (no state leaks but the filesystem), as a new
 * session like `docker exec` gives it, with stdin from a file and stdout/stderr into two FIFOs.
 * FIFOs, not files, so `echo x >/dev/stderr` appends as it does on a pipe instead of
 * truncating, and a background process that outlives the command gets a closed pipe, as it
 * would after `docker exec` returns.
 *
 * Readers come in batches, because a process start is the dominant cost (~1-2 ms each): one
 * `cat a0 a1 ... a32` per stream drains the FIFOs of 32 calls in turn (a32 only closes the
 * batch). Opening the next call's FIFO for writing is the drain barrier: it returns only once
 * the reader has reached end-of-file on this call's FIFO and moved on.
 *   stdout: the reader writes straight into the channel's stdout ("stream" mode); a call's byte
 *           count is the growth of the reader's `wchar` in /proc/PID/io. Without /proc/PID/io
 *           ("file" mode) it writes to a file like stderr does and the answer is sent with dd.
 *   stderr: the reader writes to a file the agent holds open; a call's byte count is the growth
 *           of the agent's offset on it (/proc/$$/fdinfo), and the bytes are sent with `dd`
 *           byte ranges (or `tail | head`) through /proc/$$/fd, so a command that empties /tmp
 *           cannot corrupt them. Nothing is started when a call wrote no stderr.
 * So a call costs one process start (two execs: setsid, the command) when its stderr is empty.
The first batch is set up before the hello: it costs several process starts (~50-100 ms on a
loaded 2-CPU host), which the first call would otherwise pay; a channel that said hello answers
at once.
 * A reader that dies (the host's drain-grace kill, or a task's `pkill cat`) sends SIGCHLD,
 * trapped around the barrier so the open is interrupted, and the next call starts a fresh
 * batch. When the next FIFO is gone (a task emptied /tmp) the barrier waits for the reader to
 * exit instead, which it does once it finds no more FIFOs (opening a missing FIFO for writing
 * would create a plain file and not wait). A stdout reader that has exited can no longer be
 * counted: that call's answer says `?`. File readers may write at most 1 GiB per batch (`ulimit -f`, 512-byte blocks) so a
 * runaway command cannot fill the disk; past that the command sees a closed pipe. A batch also
 * ends early once its files pass 64 MiB.
 *
 * Per call the agent reads nothing from /proc that is longer than a line or two: sh's `read`
 * takes one byte per system call, so a /proc/PID/stat (~300 bytes) costs ~0.2 ms. A process is
 * alive while its /proc/PID/fd/1 link exists (a zombie has none); the subshell finds its own pid
 * as the single entry of /proc/self/task.
 *
 * TERM, INT and HUP are caught so `pkill sh` in a task does not take the channel down; they are
 * reset to the default in the command (traps never pass through exec). The agent's own stderr
 * goes to /dev/null: the channel's stderr is the control stream.
 */
export const CHANNEL_AGENT = `exec 5>&2 2>/dev/null
ct_n='
'
ct_d=$(mktemp -d "\${TMPDIR:-/tmp}/ct-exec.XXXXXX") || { echo 'E mktemp -d failed' >&5; exit 0; }
ct_ra= ct_rb=
trap 'kill -KILL $ct_ra $ct_rb; rm -rf "$ct_d"' EXIT
ct_sig=0
trap 'ct_sig=1' TERM INT HUP
[ -r "/proc/$$/fdinfo/0" ] || { echo 'E /proc/PID/fdinfo is not readable' >&5; exit 0; }
[ -h "/proc/$$/fd/5" ] || { echo 'E /proc/PID/fd is not readable' >&5; exit 0; }
for ct_x in /proc/self/task/*; do :; done
[ "\${ct_x##*/}" = "$$" ] || { echo 'E /proc/self/task does not name the shell' >&5; exit 0; }
[ "$(printf abc | head -c 2)" = ab ] || { echo 'E head -c is missing' >&5; exit 0; }
[ "$(printf abc | tail -c +2)" = bc ] || { echo 'E tail -c is missing' >&5; exit 0; }
[ "$(echo ab | cat)" = ab ] || { echo 'E cat is missing' >&5; exit 0; }
mkfifo "$ct_d/t" && [ -p "$ct_d/t" ] && rm -f "$ct_d/t" || { echo 'E mkfifo or rm is missing' >&5; exit 0; }
printf abcdef > "$ct_d/t"
ct_dd=0
[ "$(dd if="$ct_d/t" bs=65536 skip=2 count=3 iflag=skip_bytes,count_bytes)" = cde ] && ct_dd=1
rm -f "$ct_d/t"
ct_st=file ct_of=6
[ "$1" != file ] && { read -r ct_x ct_x && read -r ct_x ct_x; } < "/proc/$$/io" && [ -n "$ct_x" ] && ct_st=stream ct_of=1
ct_ss=
for ct_x in /usr/bin/setsid /bin/setsid /usr/sbin/setsid /sbin/setsid; do
  if [ -x "$ct_x" ]; then ct_ss=$ct_x; break; fi
done
ct_e=$(tr '\\0' '\\n' < "/proc/$$/environ")
ct_un=
for ct_x in PWD OLDPWD SHLVL; do
  case "$ct_n$ct_e" in *"$ct_n$ct_x="*) ;; *) ct_un="$ct_un $ct_x" ;; esac
done
ct_e=
ct_u() { unset $ct_un; }
ct_f() { printf 'F %s\\n' "$ct_i" >&5; exit 126; }
ct_l() {
  case $1 in
    */*) [ -f "$1" ] && [ -x "$1" ]; return ;;
    '') return 1 ;;
  esac
  ct_q=\${PATH-}
  while :; do
    ct_x=\${ct_q%%:*}
    [ -f "\${ct_x:-.}/$1" ] && [ -x "\${ct_x:-.}/$1" ] && return 0
    case $ct_q in *:*) ct_q=\${ct_q#*:} ;; *) return 1 ;; esac
  done
}
ct_alive() {
  [ -n "$1" ] && [ -h "/proc/$1/fd/1" ]
}
ct_end() {
  exec 8>&- 9>&-
  kill -KILL $ct_ra $ct_rb
  for ct_x in $ct_ra $ct_rb; do
    while [ -e "/proc/$ct_x" ]; do wait "$ct_x"; [ "$?" = 127 ] && break; done
  done
  ct_ra= ct_rb= ct_k=32
}
ct_bar() {
  trap 'ct_sig=1' CHLD
  while ct_alive "$3"; do
    if [ ! -p "$2" ]; then
      while [ -e "/proc/$3" ]; do wait "$3"; [ "$?" = 127 ] && break; done
      break
    fi
    if eval "command exec $1>\\"\\$2\\""; then trap - CHLD; return 0; fi
  done
  trap - CHLD
  return 1
}
ct_wchar() {
  ct_w=
  { read -r ct_x ct_x && read -r ct_x ct_w; } < "/proc/$1/io" || ct_w=
  case $ct_w in ''|*[!0-9]*) ct_w= ;; esac
}
ct_b() {
  ct_end
  [ -d "$ct_d" ] || mkdir -p -m 700 "$ct_d" || return 1
  rm -f "$ct_d"/*
  set --
  ct_j=0
  while [ "$ct_j" -le 32 ]; do set -- "$@" "$ct_d/a$ct_j" "$ct_d/b$ct_j"; ct_j=$((ct_j + 1)); done
  mkfifo "$@" || return 1
  exec 6<>"$ct_d/o" 7<>"$ct_d/e" || return 1
  set --
  ct_j=0
  while [ "$ct_j" -le 32 ]; do set -- "$@" "$ct_d/a$ct_j"; ct_j=$((ct_j + 1)); done
  { ulimit -f 2097152; exec cat "$@"; } >&"$ct_of" 5>&- 6>&- 7>&- &
  ct_ra=$!
  set --
  ct_j=0
  while [ "$ct_j" -le 32 ]; do set -- "$@" "$ct_d/b$ct_j"; ct_j=$((ct_j + 1)); done
  { ulimit -f 2097152; exec cat "$@"; } >&7 5>&- 6>&- 7>&- &
  ct_rb=$!
  ct_k=0 ct_o0=0 ct_e0=0
  ct_bar 8 "$ct_d/a0" "$ct_ra" && ct_bar 9 "$ct_d/b0" "$ct_rb"
}
ct_r() {
  [ "$3" -gt 0 ] || return 0
  if [ "$ct_dd" = 1 ]; then
    dd if="/proc/$$/fd/$1" bs=65536 skip="$2" count="$3" iflag=skip_bytes,count_bytes 8>&- 9>&-
  else
    tail -c "+$(($2 + 1))" "/proc/$$/fd/$1" 8>&- 9>&- | head -c "$3" 8>&- 9>&-
  fi
}
ct_k=32
if ct_b; then
  if [ "$ct_st" = stream ]; then ct_wchar "$ct_ra"; ct_o0=$ct_w; fi
else
  ct_k=32
fi
printf 'H 1 %s %s %s\\n' "$$" "\${ct_ss:--}" "$ct_st" >&5
while :; do
  if ! IFS=' ' read -r ct_i ct_c ct_il ct_sl; then
    if [ "$ct_sig" = 1 ]; then ct_sig=0; continue; fi
    break
  fi
  case "$ct_i:$ct_c:$ct_il:$ct_sl" in *[!0-9:]*|*::*|:*|*:) echo 'E bad request header' >&5; exit 0 ;; esac
  if [ "$ct_k" -ge 32 ] || [ ! -p "$ct_d/a$ct_k" ] || ! ct_alive "$ct_ra" || ! ct_alive "$ct_rb"; then
    ct_b || { echo 'E cannot start output readers' >&5; exit 0; }
    if [ "$ct_st" = stream ]; then ct_wchar "$ct_ra"; ct_o0=$ct_w; fi
  fi
  ct_m=$ct_k ct_in=/dev/null
  if [ "$ct_sl" -gt 0 ]; then
    head -c "$((ct_sl + ct_il))" > "$ct_d/q$ct_m" 8>&- 9>&-
    head -c "$ct_sl" "$ct_d/q$ct_m" > "$ct_d/s$ct_m" 8>&- 9>&-
    if [ "$ct_il" -gt 0 ]; then tail -c "+$((ct_sl + 1))" "$ct_d/q$ct_m" > "$ct_d/i$ct_m" 8>&- 9>&-; ct_in=$ct_d/i$ct_m; fi
    ct_s=". \\"\\$ct_d/s$ct_m\\""
  else
    IFS= read -r ct_s
    if [ "$ct_il" -gt 0 ]; then head -c "$ct_il" > "$ct_d/i$ct_m" 8>&- 9>&-; ct_in=$ct_d/i$ct_m; fi
  fi
  (
    for ct_p in /proc/self/task/*; do ct_p=\${ct_p##*/}; done
    eval "$ct_s"
    ct_l "$1" || ct_f
    printf 'P %s %s %s %s\\n' "$ct_i" "$ct_p" "$ct_ra" "$ct_rb" >&5
    if [ -n "$ct_ss" ]; then exec "$ct_ss" "$@" 5>&-; else exec "$@" 5>&-; fi
  ) < "$ct_in" >&8 2>&9 6>&- 7>&- 8>&- 9>&-
  ct_rc=$?
  exec 8>&- 9>&-
  printf 'X %s %s\\n' "$ct_i" "$ct_rc" >&5
  ct_k=$((ct_k + 1))
  ct_ok=1 ct_w=
  if ct_bar 8 "$ct_d/a$ct_k" "$ct_ra"; then [ "$ct_st" = stream ] && ct_wchar "$ct_ra"; else ct_ok=0; fi
  ct_bar 9 "$ct_d/b$ct_k" "$ct_rb" || ct_ok=0
  if [ "$ct_st" = stream ]; then
    ct_o1=$ct_w
  else
    IFS=' 	' read -r ct_x ct_o1 < "/proc/$$/fdinfo/6"
  fi
  IFS=' 	' read -r ct_x ct_e1 < "/proc/$$/fdinfo/7"
  ct_pe=$((ct_e1 - ct_e0))
  ct_se=$ct_pe; [ "$ct_se" -gt "$ct_c" ] && ct_se=$ct_c
  if [ -z "$ct_o1" ]; then
    printf 'R %s %s ? ? %s %s\\n' "$ct_i" "$ct_rc" "$ct_pe" "$ct_se" >&5
    [ "$ct_se" -gt 0 ] || printf 'Z %s\\n' "$ct_i" >&5
  else
    ct_po=$((ct_o1 - ct_o0)) ct_so=$((ct_o1 - ct_o0))
    [ "$ct_st" = file ] && [ "$ct_so" -gt "$ct_c" ] && ct_so=$ct_c
    if [ "$ct_se" -gt 0 ]; then ct_z=; else ct_z="Z $ct_i$ct_n"; fi
    printf 'R %s %s %s %s %s %s\\n%s' "$ct_i" "$ct_rc" "$ct_po" "$ct_so" "$ct_pe" "$ct_se" "$ct_z" >&5
    [ "$ct_st" = file ] && ct_r 6 "$((ct_o1 - ct_so))" "$ct_so"
  fi
  if [ "$ct_se" -gt 0 ]; then
    ct_r 7 "$((ct_e1 - ct_se))" "$ct_se" >&5
    printf 'Z %s\\n' "$ct_i" >&5
  fi
  [ -z "$ct_o1" ] && exit 0
  ct_o0=$ct_o1 ct_e0=$ct_e1
  [ "$ct_ok" = 0 ] || [ "$ct_k" -ge 32 ] || [ "$ct_o1" -gt 67108864 ] || [ "$ct_e1" -gt 67108864 ] && ct_end
  [ "$((ct_il + ct_sl))" -gt 1048576 ] && rm -f "$ct_d/i$ct_m" "$ct_d/q$ct_m" "$ct_d/s$ct_m"
done`;
