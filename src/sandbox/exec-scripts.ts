/**
 * Small POSIX sh programs that run inside a sandbox. They need only `sh` (busybox is enough);
 * `setsid` is used when present so a timeout kills the whole process tree, not just its root.
 */

/**
 * `sh -c TIMEOUT_WRAPPER sh SECONDS CMD...`: runs CMD with the caller's stdin in a new session,
 * and kills that session's process group after SECONDS. Exit code 137 then. Stdin is passed
 * through fd 3 because a background job's stdin is otherwise /dev/null.
 */
export const TIMEOUT_WRAPPER = `t=$1; shift
exec 3<&0
if command -v setsid >/dev/null 2>&1; then setsid "$@" <&3 3<&- & else "$@" <&3 3<&- & fi
p=$!
exec 3<&-
( trap 'kill $s 2>/dev/null; exit 0' TERM; sleep "$t" & s=$!; wait "$s"; kill -KILL -"$p" 2>/dev/null; kill -KILL "$p" 2>/dev/null ) </dev/null >/dev/null 2>&1 &
w=$!
wait "$p"; rc=$?
kill "$w" 2>/dev/null
exit $rc`;

/** Exit codes of READ_FILE / WRITE_FILE that name a file error. */
export const FILE_EXIT = { isDirectory: 21, notFound: 22, permission: 23 } as const;

/**
 * `sh -c READ_FILE sh PATH [modes]`: prints the file, or exits with a FILE_EXIT code. With
 * `modes`, a file no permission bit lets anyone read is refused even to root (one `ls` more),
 * as Inspect's docker sandbox, which reads through the engine, refuses it.
 */
export const READ_FILE = `f=$1
if [ -d "$f" ]; then exit ${FILE_EXIT.isDirectory}; fi
if [ ! -e "$f" ]; then exit ${FILE_EXIT.notFound}; fi
if [ ! -r "$f" ]; then exit ${FILE_EXIT.permission}; fi
if [ "\${2-}" = modes ]; then case $(ls -ld -- "$f" 2>/dev/null) in ?r*|????r*|???????r*) ;; *) exit ${FILE_EXIT.permission} ;; esac; fi
exec cat -- "$f"`;

/**
 * `sh -c WRITE_FILE sh PATH [modes]` with the contents on stdin: creates parents, then writes.
 * The parent is cut out with parameter expansion rather than `dirname`, one process less a
 * call. With `modes`, an existing file no permission bit lets anyone write is refused even to
 * root, as a user without root would be.
 */
export const WRITE_FILE = `f=$1
case $f in */*) d=\${f%/*}; d=\${d:-/} ;; *) d=. ;; esac
[ -d "$d" ] || mkdir -p -- "$d" 2>/dev/null || { [ -e "$d" ] || exit ${FILE_EXIT.permission}; }
if [ -d "$f" ]; then exit ${FILE_EXIT.isDirectory}; fi
if [ -e "$f" ] && [ ! -w "$f" ]; then exit ${FILE_EXIT.permission}; fi
if [ -e "$f" ] && [ "\${2-}" = modes ]; then case $(ls -ld -- "$f" 2>/dev/null) in ??w*|?????w*|????????w*) ;; *) exit ${FILE_EXIT.permission} ;; esac; fi
cat > "$f" || exit ${FILE_EXIT.permission}`;
