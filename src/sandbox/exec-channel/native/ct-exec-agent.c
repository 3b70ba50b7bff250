/*
 * ct-exec-agent: the exec channel's native agent (see ../agent-script.ts for the protocol it
 * shares with the sh agent, and native-agent.ts for how it gets into a container).
 *
 * A static binary, so it runs in any x86_64 image (busybox, distroless with a sh) whatever its
 * libc. The host streams it into a private temporary directory through the channel's own
 * `docker exec -i` and execs it; where it cannot run (another architecture, a noexec /tmp)
 * the sh agent takes over in the same exec.
 *
 * Why native: per call the sh agent pays two process starts of its own (a subshell and
 * `setsid`) plus byte-at-a-time reads, ~1-2 ms on a 2-CPU host. Here a call is the command's
 * exec in a child forked ahead of it (the spare: its own session, default signals, its pipes
 * made; a call with stdin bytes forks then), two pipes read with poll(), and as few writes to
 * the channel as the answer allows: each write is a message through containerd's shim, dockerd
 * and the docker client.
 *
 *   host -> agent  `<id> <cap> <stdin bytes> <payload bytes>\n`, then the payload, then stdin.
 *                  payload: NUL-terminated strings: the cwd (empty: none), argc, argv[0..argc),
 *                  then NAME=value assignments laid over the agent's environment.
 *   agent -> host  everything on the control stream (the channel's stderr): `F <id>` (cwd or
 *                  command not found, then X 126 and an empty R: the host runs it with docker
 *                  exec) or `P <id> <pid> 0 0` (no reader processes), written before the command
 *                  can run a line of its own; `O <id> <n>\n` + n stdout bytes, as they come
 *                  (the first GATHER_MS of them held back to go with the answer); `X <id>
 *                  <code>`; `R <id> <code> <out total> <out total> <err total> <err sent>`, the
 *                  last <err sent> bytes of stderr, `Z <id>`. Stderr keeps its last <cap> bytes
 *                  in memory. A short call's O, X, R and Z go as one write.
 *
 * Hello: `H 1 <pid> setsid stream native direct`. The command runs in its own session (process group
 * = pid, for the host's timeout kill), with default signal dispositions and an empty signal
 * mask, stdin from the request's bytes (a memfd, else an unlinked file) or /dev/null, in the
 * request's cwd or else the one docker exec gave (the agent itself works from its directory).
 * When the command has exited but something it started still holds its stdout or stderr, the
 * agent reads on for the drain grace (argv[2], ms), then closes the pipes: those processes see
 * a closed pipe, as after `docker exec` returns.
 *
 * The direct socket (`direct` in the hello, said once the agent works from its directory): the
 * host, when it runs on the engine's own machine, may create a listening socket in that
 * directory itself, through /proc/<exec pid>/cwd, and answer the hello with `D <agent token>
 * <host token> <name>\n` (tokens: 32-128 lowercase hex; name: a plain file name). The agent
 * connects to ./<name>; the listener must be outside the container's pid namespace
 * (SO_PEERCRED pid 0: nothing the sandbox runs can pass); the agent sends its token first, then
 * reads the host's token (2 s). Any failure closes the connection and says `D -`: requests keep
 * coming on stdin. The host never connects to anything in the container, so no path the
 * container could name or replace leads it anywhere. On success the socket carries both
 * directions (`H 1 <pid> setsid direct native`, then the same protocol), one hop instead of
 * three per message; stdin is then only watched for its end, which still ends the agent.
 *
 * The agent ignores TERM, INT and HUP (a task's `pkill` must not take the channel down) and
 * exits when its stdin closes, removing its directory (argv[1]); the spare then reads the end of
 * its pipe and exits too.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define MAX_HEADER 512
#define MAX_PAYLOAD (16u * 1024 * 1024)
#define GATHER_MS 5
#define DEFAULT_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

static const char *agent_dir = "";
/* The cwd docker exec gave (O_PATH), where a call without a cwd runs; -1: the agent's own cwd. */
static int home_fd = -1;
static long drain_ms = 2000;
static int chld_pipe[2] = {-1, -1};
/* Where requests come from and answers go: the docker exec's stdin and stderr, or, once the
   host has connected directly (try_direct), its socket for both. */
static int in_fd = 0, ctl_fd = 2;
static int direct_mode;

/* ------------------------------------------------------------------ output helpers */

static void write_all(int fd, const void *buf, size_t n) {
  const char *p = buf;
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      _exit(0); /* the host is gone */
    }
    p += w;
    n -= (size_t)w;
  }
}

/*
 * Control lines are queued and written together (flush): each write is a message through
 * containerd's shim, dockerd and the docker client, so a short call's X, R and Z travel as one.
 */
static char ctl[4096];
static size_t ctl_len;

static void flush(void) {
  if (ctl_len > 0) write_all(ctl_fd, ctl, ctl_len);
  ctl_len = 0;
}

/* Writes the iovecs whole, in order, as one write where the pipe takes it. */
static void writev_all(int fd, struct iovec *v, int n) {
  while (n > 0) {
    if (v->iov_len == 0) {
      v++, n--;
      continue;
    }
    ssize_t w = writev(fd, v, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      _exit(0); /* the host is gone */
    }
    while (n > 0 && (size_t)w >= v->iov_len) w -= (ssize_t)v->iov_len, v++, n--;
    if (n > 0) v->iov_base = (char *)v->iov_base + w, v->iov_len -= (size_t)w;
  }
}

static void control(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void control(const char *fmt, ...) {
  if (ctl_len > sizeof ctl - MAX_HEADER) flush();
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(ctl + ctl_len, MAX_HEADER, fmt, ap);
  va_end(ap);
  if (n > 0) ctl_len += (size_t)n < MAX_HEADER ? (size_t)n : MAX_HEADER - 1;
}

static void cleanup_and_exit(int code) {
  if (agent_dir[0] == '/') {
    char path[4096];
    snprintf(path, sizeof path, "%s/ct-exec-agent", agent_dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/i", agent_dir);
    unlink(path);
    rmdir(agent_dir);
  }
  exit(code);
}

static void refuse(const char *reason) {
  control("E %s\n", reason);
  flush();
  cleanup_and_exit(0);
}

/* ------------------------------------------------------------------ buffered stdin */

static char inbuf[65536];
static size_t in_start, in_end;

/* 0 at end of input; in direct mode also when the docker exec's stdin ends (or says anything). */
static int fill(void) {
  if (in_start == in_end) in_start = in_end = 0;
  for (;;) {
    if (direct_mode) {
      struct pollfd p[2] = {{.fd = in_fd, .events = POLLIN}, {.fd = 0, .events = POLLIN}};
      if (poll(p, 2, -1) < 0) {
        if (errno == EINTR) continue;
        return 0;
      }
      if (p[1].revents) return 0;
      if (!p[0].revents) continue;
    }
    ssize_t r = read(in_fd, inbuf + in_end, sizeof inbuf - in_end);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return 0;
    in_end += (size_t)r;
    return 1;
  }
}

/* One line without its newline; 0 at end of input; refuses a line that is too long. */
static int read_line(char *out, size_t cap) {
  size_t n = 0;
  for (;;) {
    while (in_start < in_end) {
      char c = inbuf[in_start++];
      if (c == '\n') {
        out[n] = 0;
        return 1;
      }
      if (n + 1 >= cap) refuse("bad request header");
      out[n++] = c;
    }
    if (!fill()) {
      if (n > 0) refuse("bad request header");
      return 0;
    }
  }
}

/* Exactly n bytes, to dst (or to fd when dst is NULL and fd >= 0, or dropped). */
static void read_exact(char *dst, int fd, size_t n) {
  while (n > 0) {
    if (in_start == in_end && !fill()) cleanup_and_exit(0);
    size_t k = in_end - in_start;
    if (k > n) k = n;
    if (dst) {
      memcpy(dst, inbuf + in_start, k);
      dst += k;
    } else if (fd >= 0) {
      write_all(fd, inbuf + in_start, k);
    }
    in_start += k;
    n -= k;
  }
}

/* ------------------------------------------------------------------ one call */

static int parse_u64(const char *s, uint64_t *out) {
  if (!*s) return 0;
  uint64_t v = 0;
  for (; *s; s++) {
    if (*s < '0' || *s > '9') return 0;
    if (v > (UINT64_MAX - 9) / 10) return 0;
    v = v * 10 + (uint64_t)(*s - '0');
  }
  *out = v;
  return 1;
}

static long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

/* A file holding the command's stdin, positioned at its start. */
static int stdin_file(uint64_t n) {
  if (n == 0) return open("/dev/null", O_RDONLY | O_CLOEXEC);
  int fd = (int)syscall(SYS_memfd_create, "ct-stdin", 1u /* MFD_CLOEXEC */);
  if (fd < 0) {
    char path[4096];
    snprintf(path, sizeof path, "%s/i", agent_dir);
    mkdir(agent_dir, 0700); /* a task may have emptied /tmp */
    fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd >= 0) unlink(path);
  }
  if (fd < 0) {
    read_exact(NULL, -1, n);
    return -1;
  }
  read_exact(NULL, fd, n);
  lseek(fd, 0, SEEK_SET);
  return fd;
}

/* The agent's environment with `NAME=value` assignments laid over it. */
static char **command_env(char **assign, size_t count) {
  size_t base = 0;
  while (environ[base]) base++;
  char **env = calloc(base + count + 1, sizeof *env);
  if (!env) return NULL;
  size_t n = 0;
  for (size_t i = 0; i < base; i++) {
    const char *eq = strchr(environ[i], '=');
    size_t klen = eq ? (size_t)(eq - environ[i]) : strlen(environ[i]);
    int replaced = 0;
    for (size_t j = 0; j < count; j++) {
      if (strncmp(assign[j], environ[i], klen) == 0 && assign[j][klen] == '=') replaced = 1;
    }
    if (!replaced) env[n++] = environ[i];
  }
  for (size_t j = 0; j < count; j++) {
    /* a name given twice: the last one wins */
    const char *eq = strchr(assign[j], '=');
    size_t klen = (size_t)(eq - assign[j]);
    int later = 0;
    for (size_t k = j + 1; k < count; k++) {
      if (strncmp(assign[k], assign[j], klen + 1) == 0) later = 1;
    }
    if (!later) env[n++] = assign[j];
  }
  env[n] = NULL;
  return env;
}

/* execve, and for a file the kernel cannot run (no `#!`), sh with the file, as sh does. */
static void exec_file(const char *path, char **argv, char **env) {
  execve(path, argv, env);
  if (errno != ENOEXEC) return;
  size_t argc = 0;
  while (argv[argc]) argc++;
  char **sh = calloc(argc + 2, sizeof *sh);
  if (!sh) return;
  sh[0] = "sh";
  sh[1] = (char *)path;
  for (size_t i = 1; i <= argc; i++) sh[i + 1] = argv[i];
  execve("/bin/sh", sh, env);
}

/* `name` as seen from the command's cwd (into buf): relative names resolve against cwd. */
static const char *from_cwd(const char *cwd, const char *name, char *buf, size_t cap) {
  if (name[0] == '/' || !cwd[0]) return name;
  if ((size_t)snprintf(buf, cap, "%s/%s", cwd, name) >= cap) return NULL;
  return buf;
}

/* Whether `path` is a file the user may run; a relative path is taken from `dir` (a fd). */
static int runnable(int dir, const char *path) {
  struct stat st;
  return path && fstatat(dir, path, &st, 0) == 0 && S_ISREG(st.st_mode) && faccessat(dir, path, X_OK, 0) == 0;
}

/*
 * The file sh would run for `file` under the command's PATH and cwd (into buf), or NULL, as the
 * sh agent's lookup does before it says P: a missing command is F, and docker exec reports it.
 */
static const char *find_command(const char *file, const char *cwd, char **env, char *buf, size_t cap) {
  /* Without a cwd, relative names are the ones the command will see from docker exec's cwd. */
  int from = cwd[0] || home_fd < 0 ? AT_FDCWD : home_fd;
  if (strchr(file, '/')) {
    const char *p = from_cwd(cwd, file, buf, cap);
    return runnable(from, p) ? p : NULL;
  }
  if (!file[0]) return NULL;
  const char *path = NULL;
  for (char **e = env; *e; e++) {
    if (strncmp(*e, "PATH=", 5) == 0) path = *e + 5;
  }
  if (!path) path = DEFAULT_PATH;
  char dir[4096], joined[4096];
  for (const char *p = path;;) {
    const char *colon = strchr(p, ':');
    size_t dlen = colon ? (size_t)(colon - p) : strlen(p);
    if (dlen < sizeof dir) {
      memcpy(dir, p, dlen);
      dir[dlen] = 0;
      if ((size_t)snprintf(joined, sizeof joined, "%s/%s", dlen ? dir : ".", file) < sizeof joined) {
        const char *q = from_cwd(cwd, joined, buf, cap);
        if (q == joined && strlen(joined) < cap) q = strcpy(buf, joined);
        if (runnable(from, q)) return q;
      }
    }
    if (!colon) return NULL;
    p = colon + 1;
  }
}

/* The cwd a command may start in (the sh agent's `cd` would succeed). */
static int cwd_ok(const char *cwd) {
  struct stat st;
  return !cwd[0] || (stat(cwd, &st) == 0 && S_ISDIR(st.st_mode) && access(cwd, X_OK) == 0);
}

/* Keeps the last `cap` bytes written to it: a buffer grown as needed up to cap, then a ring. */
struct tail {
  char *buf;
  size_t cap, alloc, len, head; /* head: the oldest byte, once the ring is full */
  uint64_t total;
  int failed;
};

static void tail_push(struct tail *t, const char *p, size_t n) {
  t->total += n;
  if (t->cap == 0 || t->failed) return;
  if (n >= t->cap) {
    p += n - t->cap;
    n = t->cap;
    t->len = t->head = 0; /* everything kept so far is older than these bytes */
  }
  if (t->len < t->cap) {
    size_t k = n < t->cap - t->len ? n : t->cap - t->len;
    if (t->len + k > t->alloc) {
      size_t na = t->alloc ? t->alloc : 65536;
      while (na < t->len + k) na *= 2;
      if (na > t->cap) na = t->cap;
      char *nb = realloc(t->buf, na);
      if (!nb) {
        t->failed = 1;
        return;
      }
      t->buf = nb;
      t->alloc = na;
    }
    memcpy(t->buf + t->len, p, k);
    t->len += k;
    p += k;
    n -= k;
  }
  while (n > 0) {
    size_t k = t->cap - t->head < n ? t->cap - t->head : n;
    memcpy(t->buf + t->head, p, k);
    t->head = (t->head + k) % t->cap;
    p += k;
    n -= k;
  }
}

/* How many bytes are kept (the answer sends them oldest first: buf[head..len) then buf[0..head)). */
static size_t tail_size(const struct tail *t) { return t->failed ? 0 : t->len; }


/* Stdout bytes of call `id` as an O frame (header and bytes in one write). */
static void send_out(uint64_t id, const char *data, size_t n) {
  if (n == 0) {
    flush();
    return;
  }
  char h[64];
  int hn = snprintf(h, sizeof h, "O %llu %zu\n", (unsigned long long)id, n);
  struct iovec v[3] = {{ctl, ctl_len}, {h, (size_t)hn}, {(void *)data, n}};
  writev_all(ctl_fd, v, 3);
  ctl_len = 0;
}

static void on_chld(int sig) {
  (void)sig;
  int e = errno;
  if (chld_pipe[1] >= 0) (void)!write(chld_pipe[1], "c", 1);
  errno = e;
}

static void on_ignored(int sig) { (void)sig; }

struct spare {
  pid_t pid;
  int spec, out, err; /* spec: write end of the pipe it waits on; out, err: read ends */
};
static struct spare spare = {-1, -1, -1, -1};

/* In a child: its own session, default signals, fds 0-2 set. */
static void child_setup(int in, int out, int err) {
  setsid();
  struct sigaction dfl;
  memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  for (int s = 1; s < NSIG; s++) sigaction(s, &dfl, NULL);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
  if (in < 0 || dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0) _exit(126);
  /* Every other descriptor is close-on-exec: the command starts with 0, 1 and 2 only. */
}

static int parse_call(char *payload, size_t plen, char **cwd, char ***argv, char ***env);

/* In a child: the command in its cwd (none: docker exec's); what went wrong on its stderr, as sh would say it. */
static void start_command(const char *cwd, const char *file, char **argv, char **env) {
  if (cwd[0] ? chdir(cwd) != 0 : home_fd >= 0 && fchdir(home_fd) != 0) {
    dprintf(2, "cd: %s: %s\n", cwd[0] ? cwd : ".", strerror(errno));
    _exit(126);
  }
  exec_file(file, argv, env);
  int e = errno;
  dprintf(2, "%s: %s\n", argv[0], strerror(e));
  _exit(e == ENOENT ? 127 : 126);
}

static char *arg_area;
static size_t arg_len;

static void spare_run(int spec) {
  /* Named apart from the agent in ps and /proc/PID/cmdline while it waits (its exec renames it). */
  prctl(PR_SET_NAME, "ct-exec-spare");
  if (arg_area && arg_len > 0) {
    memset(arg_area, 0, arg_len);
    strncpy(arg_area, "ct-exec-agent spare", arg_len - 1);
  }
  uint32_t len;
  if (read(spec, &len, 4) != 4 || len > MAX_PAYLOAD + 8192) _exit(0);
  char *buf = malloc(len + 1);
  if (!buf) _exit(126);
  size_t got = 0;
  while (got < len) {
    ssize_t r = read(spec, buf + got, len - got);
    if (r <= 0) _exit(0);
    got += (size_t)r;
  }
  buf[len] = 0;
  char *file = buf;
  size_t flen = strlen(file);
  char *cwd, **argv, **env;
  if (!parse_call(buf + flen + 1, len - flen - 1, &cwd, &argv, &env)) _exit(126);
  start_command(cwd, file, argv, env);
}

/* A child forked ahead of the next call, waiting for its command (a call without stdin). */
static void make_spare(void) {
  int spec[2], out[2], err[2];
  if (pipe2(spec, O_CLOEXEC)) return;
  if (pipe2(out, O_CLOEXEC)) return (void)(close(spec[0]), close(spec[1]));
  if (pipe2(err, O_CLOEXEC)) return (void)(close(spec[0]), close(spec[1]), close(out[0]), close(out[1]));
  pid_t pid = fork();
  if (pid == 0) {
    /* Not its own pipe's write end, or it would never see the agent go. */
    close(spec[1]);
    close(out[0]);
    close(err[0]);
    child_setup(open("/dev/null", O_RDONLY | O_CLOEXEC), out[1], err[1]);
    spare_run(spec[0]);
  }
  close(spec[0]);
  close(out[1]);
  close(err[1]);
  if (pid < 0) return (void)(close(spec[1]), close(out[0]), close(err[0]));
  spare = (struct spare){pid, spec[1], out[0], err[0]};
}

/* Takes the spare for a command (file + payload), or says it is gone. */
/* Says a command started (P), before anything of it can run. */
static void started(uint64_t id, pid_t pid) {
  control("P %llu %d 0 0\n", (unsigned long long)id, (int)pid);
  flush();
}

/*
 * Takes the spare for a command (file + payload): P goes first, then the command to the spare,
 * which execs it at once (woken, it may take this CPU before the agent writes again). Returns 0
 * when the spare is gone; a P already sent is then followed by the fresh child's.
 */
static int use_spare(uint64_t id, const char *file, const char *payload, size_t plen, pid_t *pid, int *out, int *err) {
  if (spare.pid < 0) return 0;
  struct spare s = spare;
  spare = (struct spare){-1, -1, -1, -1};
  int st;
  size_t flen = strlen(file);
  uint32_t len = (uint32_t)(flen + 1 + plen);
  int ok = waitpid(s.pid, &st, WNOHANG) == 0;
  if (ok) started(id, s.pid);
  if (ok) {
    char *msg = malloc(4 + len);
    if (msg) {
      memcpy(msg, &len, 4);
      memcpy(msg + 4, file, flen + 1);
      memcpy(msg + 4 + flen + 1, payload, plen);
      size_t n = 4 + len, at = 0;
      while (at < n) {
        ssize_t w = write(s.spec, msg + at, n - at);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) break;
        at += (size_t)w;
      }
      ok = at == n;
      free(msg);
    } else {
      ok = 0;
    }
  }
  close(s.spec);
  if (!ok) {
    kill(s.pid, SIGKILL);
    waitpid(s.pid, &st, 0);
    close(s.out);
    close(s.err);
    return 0;
  }
  *pid = s.pid;
  *out = s.out;
  *err = s.err;
  return 1;
}

/*
 * payload: cwd \0 argc \0 argv... \0 assignments... \0, parsed in place (the strings point
 * into it); argv and env are allocated (env's strings are the agent's own or the payload's).
 */
static int parse_call(char *payload, size_t plen, char **cwd_out, char ***argv_out, char ***env_out) {
  size_t nf = 0;
  for (size_t i = 0; i < plen; i++) nf += payload[i] == 0;
  char **fields = calloc(nf + 1, sizeof *fields);
  if (!fields) return 0;
  nf = 0;
  for (size_t i = 0, start = 0; i < plen; i++) {
    if (payload[i] == 0) {
      fields[nf++] = payload + start;
      start = i + 1;
    }
  }
  uint64_t argc;
  if (nf < 3 || !parse_u64(fields[1], &argc) || argc < 1 || argc > nf - 2) return 0;
  char **argv = calloc(argc + 1, sizeof *argv);
  if (!argv) return 0;
  for (uint64_t i = 0; i < argc; i++) argv[i] = fields[2 + i];
  char **assign = fields + 2 + argc;
  size_t nassign = nf - 2 - argc;
  for (size_t i = 0; i < nassign; i++) {
    if (!strchr(assign[i], '=') || assign[i][0] == '=') return 0;
  }
  char **env = command_env(assign, nassign);
  if (!env) return 0;
  /* fields itself is not kept: argv and env hold what they need */
  char *cwd = fields[0];
  free(fields);
  *cwd_out = cwd;
  *argv_out = argv;
  *env_out = env;
  return 1;
}

static void run_call(uint64_t id, uint64_t cap, char *payload, size_t plen, int in_fd, int has_input) {
  char *cwd, **argv, **env;
  if (!parse_call(payload, plen, &cwd, &argv, &env)) refuse("bad request payload");
  char found[4096];
  const char *file = cwd_ok(cwd) ? find_command(argv[0], cwd, env, found, sizeof found) : NULL;
  int out[2] = {-1, -1}, err[2] = {-1, -1};
  pid_t pid = -1;
  int spared = 0;
  if (file && !has_input) spared = use_spare(id, file, payload, plen, &pid, &out[0], &err[0]);
  if (file && !spared) {
    if (pipe2(out, O_CLOEXEC) || pipe2(err, O_CLOEXEC)) refuse("cannot create pipes");
    pid = fork();
  }
  if (pid < 0) {
    /* Not started (cwd or command missing, or no fork): the host runs it with docker exec. */
    if (out[0] >= 0) close(out[0]), close(out[1]), close(err[0]), close(err[1]);
    control("F %llu\nX %llu 126\nR %llu 126 0 0 0 0\nZ %llu\n", (unsigned long long)id, (unsigned long long)id,
            (unsigned long long)id, (unsigned long long)id);
    free(argv);
    free(env);
    flush();
    return;
  }
  if (pid == 0) {
    child_setup(in_fd >= 0 ? in_fd : open("/dev/null", O_RDONLY | O_CLOEXEC), out[1], err[1]);
    start_command(cwd, file, argv, env);
  }
  if (!spared) {
    close(out[1]);
    close(err[1]);
  }
  free(argv);
  free(env);

  /* P is written before the command can run a line of its own (a fresh child's exec takes far
     longer), so a command that kills the agent at once is never taken for one that did not start. */
  if (!spared) started(id, pid);

  struct tail errs = {.cap = (size_t)cap};
  uint64_t out_total = 0;
  /* Stdout travels on the control stream as O frames (one message for a short call's output
     and answer); the first GATHER_MS of it is held to go with the answer. */
  static char obuf[65536];
  size_t olen = 0;
  long gather_until = now_ms() + GATHER_MS;
  int code = -1;
  long deadline = 0;
  int out_open = 1, err_open = 1;

  static char chunk[65536];
  while (code < 0 || out_open || err_open) {
    struct pollfd p[3];
    int np = 0, io = -1, ie = -1;
    if (out_open) p[io = np++] = (struct pollfd){.fd = out[0], .events = POLLIN};
    if (err_open) p[ie = np++] = (struct pollfd){.fd = err[0], .events = POLLIN};
    int ic = np;
    p[np++] = (struct pollfd){.fd = chld_pipe[0], .events = POLLIN};
    long now = now_ms();
    int timeout = 200; /* waitpid again now and then, whatever the signal did */
    if (code >= 0) {
      long left = deadline - now;
      if (left <= 0) break;
      timeout = (int)left;
    }
    /* X goes as soon as nothing is left to read at once; with R and Z when the drain ends too. */
    if (ctl_len > 0) {
      struct pollfd q[2];
      int nq = 0;
      if (out_open) q[nq++] = (struct pollfd){.fd = out[0], .events = POLLIN};
      if (err_open) q[nq++] = (struct pollfd){.fd = err[0], .events = POLLIN};
      if (nq == 0 || poll(q, (nfds_t)nq, 0) == 0) {
        send_out(id, obuf, olen);
        olen = 0;
      }
    }
    if (code < 0 && olen > 0) {
      long left = gather_until - now;
      if (left <= 0) {
        send_out(id, obuf, olen);
        olen = 0;
      } else if (left < timeout) {
        timeout = (int)left;
      }
    }
    int r = poll(p, (nfds_t)np, timeout);
    if (r < 0 && errno != EINTR) break;
    if (io >= 0 && (p[io].revents & (POLLIN | POLLHUP | POLLERR))) {
      ssize_t n = read(out[0], chunk, sizeof chunk);
      if (n > 0) {
        out_total += (uint64_t)n;
        if (olen + (size_t)n <= sizeof obuf && now_ms() < gather_until) {
          memcpy(obuf + olen, chunk, (size_t)n);
          olen += (size_t)n;
        } else {
          send_out(id, obuf, olen);
          olen = 0;
          send_out(id, chunk, (size_t)n);
        }
      } else if (n == 0 || errno != EINTR) {
        out_open = 0;
      }
    }
    if (ie >= 0 && (p[ie].revents & (POLLIN | POLLHUP | POLLERR))) {
      ssize_t n = read(err[0], chunk, sizeof chunk);
      if (n > 0) tail_push(&errs, chunk, (size_t)n);
      else if (n == 0 || errno != EINTR) err_open = 0;
    }
    if (p[ic].revents & POLLIN) {
      char drop[64];
      (void)!read(chld_pipe[0], drop, sizeof drop);
    }
    if (code < 0) {
      int st;
      pid_t w = waitpid(pid, &st, WNOHANG);
      if (w == pid) {
        code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        control("X %llu %d\n", (unsigned long long)id, code);
        deadline = now_ms() + drain_ms;
      }
    }
  }
  /* Past the drain grace: whatever still holds the pipes now writes into closed ones. */
  close(out[0]);
  close(err[0]);
  /* The rest of the answer in one write: X (if still queued), stdout held back, R, stderr, Z. */
  if (olen > 0) control("O %llu %zu\n", (unsigned long long)id, olen);
  size_t sent = tail_size(&errs);
  char r[MAX_HEADER], z[64];
  int rn = snprintf(r, sizeof r, "R %llu %d %llu %llu %llu %llu\n", (unsigned long long)id, code, (unsigned long long)out_total,
                    (unsigned long long)out_total, (unsigned long long)errs.total, (unsigned long long)sent);
  int zn = snprintf(z, sizeof z, "Z %llu\n", (unsigned long long)id);
  struct iovec v[6] = {{ctl, ctl_len}, {obuf, olen}, {r, (size_t)rn}, {NULL, 0}, {NULL, 0}, {z, (size_t)zn}};
  if (sent > 0) {
    /* the kept stderr, oldest first: the ring's two parts */
    v[3] = (struct iovec){errs.buf + errs.head, errs.len - errs.head};
    v[4] = (struct iovec){errs.buf, errs.head};
  }
  writev_all(ctl_fd, v, 6);
  ctl_len = 0;
  free(errs.buf);
}

/* ------------------------------------------------------------------ direct connection */

/* A token of the D request: 32-128 lowercase hex digits. */
static int hex_token(const char *t) {
  size_t n = 0;
  for (; t[n]; n++) {
    if (!((t[n] >= '0' && t[n] <= '9') || (t[n] >= 'a' && t[n] <= 'f'))) return 0;
  }
  return n >= 32 && n <= 128;
}

/* Compares in time independent of where the strings differ. */
static int same_token(const char *a, const char *b, size_t n) {
  unsigned char d = 0;
  for (size_t i = 0; i < n; i++) d |= (unsigned char)(a[i] ^ b[i]);
  return d == 0;
}

/* The host's socket in the agent's directory: a plain file name, no path. */
static int plain_name(const char *s) {
  size_t n = 0;
  for (; s[n]; n++) {
    char c = s[n];
    if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-')) return 0;
  }
  return n > 0 && n <= 64 && s[0] != '.';
}

/* One line (at most cap - 1 bytes, newline dropped) from fd within ms; 0 otherwise, or as soon as stdin has something. */
static int read_line_fd(int fd, char *out, size_t cap, long ms) {
  size_t n = 0;
  long until = now_ms() + ms;
  while (n + 1 < cap) {
    long left = until - now_ms();
    struct pollfd p[2] = {{.fd = fd, .events = POLLIN}, {.fd = 0, .events = POLLIN}};
    if (left <= 0) return 0;
    int r = poll(p, 2, (int)left);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0 || p[1].revents || !p[0].revents) return 0;
    ssize_t k = read(fd, out + n, 1);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return 0;
    if (out[n] == '\n') {
      out[n] = 0;
      return 1;
    }
    n++;
  }
  return 0;
}

/*
 * Connects to the host's socket ./<name>, in the agent's directory (its cwd), and proves itself:
 * the listener must be outside this container's pid namespace (SO_PEERCRED's pid is 0 there),
 * so a socket a process of the sandbox put in the name's place learns nothing; the agent's token
 * goes first, then the host's must come back within 2 s. Returns the connection, or -1.
 */
static int connect_host(const char *name, const char *agent_token, const char *host_token) {
  struct sockaddr_un addr = {.sun_family = AF_UNIX};
  memcpy(addr.sun_path, name, strlen(name) + 1);
  /* Non-blocking while connecting: a listener with a full backlog is a failure, not a wait. */
  int c = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (c < 0) return -1;
  struct ucred cred;
  socklen_t clen = sizeof cred;
  int fl;
  int ok = connect(c, (struct sockaddr *)&addr, sizeof addr) == 0 && getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cred, &clen) == 0 &&
           cred.pid == 0 && (fl = fcntl(c, F_GETFL)) >= 0 && fcntl(c, F_SETFL, fl & ~O_NONBLOCK) == 0;
  if (ok) {
    char msg[160], answer[160];
    int mn = snprintf(msg, sizeof msg, "%s\n", agent_token);
    size_t hlen = strlen(host_token);
    ok = send(c, msg, (size_t)mn, MSG_NOSIGNAL) == mn && read_line_fd(c, answer, sizeof answer, 2000) && strlen(answer) == hlen &&
         same_token(answer, host_token, hlen);
  }
  if (ok) return c;
  close(c);
  return -1;
}

/*
 * `D <agent token> <host token> <name>`: the host offers to talk over a unix socket instead of
 * the docker exec's streams, which saves each message two hops (containerd's shim and dockerd).
 * The host has created and listens on <name> in the agent's cwd, its directory (through
 * /proc/<agent's host pid>/cwd); the agent connects (connect_host). On success the hello,
 * `H 1 <pid> setsid direct native`, comes over the socket, which carries requests and answers
 * from then on. The docker exec stays open: its stdin ending still ends the agent. Otherwise,
 * or when the host gave up first (something on stdin), the agent says `D -` and stays on its
 * streams. The name is removed either way (the host removes it too).
 */
static void try_direct(char *args) {
  char *agent_token = strsep(&args, " "), *host_token = strsep(&args, " "), *name = args;
  if (!agent_token || !host_token || !name || !hex_token(agent_token) || !hex_token(host_token) || !plain_name(name)) {
    refuse("bad request header");
  }
  int conn = in_start == in_end ? connect_host(name, agent_token, host_token) : -1;
  unlink(name);
  if (conn < 0) {
    control("D -\n");
    flush();
    return;
  }
  in_fd = ctl_fd = conn;
  direct_mode = 1;
  control("H 1 %d setsid direct native\n", (int)getpid());
  flush();
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "-p") == 0) return 0; /* the boot script's probe */
  arg_area = argv[0];
  arg_len = (size_t)(argv[argc - 1] + strlen(argv[argc - 1]) - argv[0]);
  if (argc > 1) agent_dir = argv[1];
  if (argc > 2) {
    uint64_t v;
    if (parse_u64(argv[2], &v) && v < 3600000) drain_ms = (long)v;
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_ignored;
  sa.sa_flags = SA_RESTART;
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGHUP, &sa, NULL);
  signal(SIGPIPE, SIG_IGN);
  if (pipe2(chld_pipe, O_CLOEXEC | O_NONBLOCK)) refuse("cannot create pipes");
  sa.sa_handler = on_chld;
  sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
  sigaction(SIGCHLD, &sa, NULL);
  /* No descriptor but 0-2 may reach a command. */
  for (int fd = 3; fd < 64; fd++) {
    if (fd != chld_pipe[0] && fd != chld_pipe[1]) {
      int fl = fcntl(fd, F_GETFD);
      if (fl >= 0) fcntl(fd, F_SETFD, fl | FD_CLOEXEC);
    }
  }
  /* The agent works from its own directory, where the host may put its socket (try_direct);
     commands without a cwd still start where docker exec started the agent (home_fd). */
  int direct = 0;
  if (agent_dir[0] == '/') {
    home_fd = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (home_fd >= 0 && chdir(agent_dir) == 0) {
      direct = 1;
    } else if (home_fd >= 0) {
      close(home_fd);
      home_fd = -1;
    }
  }
  make_spare();
  control("H 1 %d setsid stream native%s\n", (int)getpid(), direct ? " direct" : "");
  flush();
  char line[MAX_HEADER];
  while (read_line(line, sizeof line)) {
    if (line[0] == 'D' && line[1] == ' ') {
      if (direct_mode || home_fd < 0) refuse("bad request header");
      try_direct(line + 2);
      continue;
    }
    char *f[4];
    int n = 0;
    for (char *s = line, *tok; n < 4 && (tok = strsep(&s, " ")); ) f[n++] = tok;
    uint64_t id, cap, ilen, plen;
    if (n != 4 || !parse_u64(f[0], &id) || !parse_u64(f[1], &cap) || !parse_u64(f[2], &ilen) || !parse_u64(f[3], &plen) ||
        plen == 0 || plen > MAX_PAYLOAD || cap > (1ull << 32)) {
      refuse("bad request header");
    }
    char *payload = malloc((size_t)plen + 1);
    if (!payload) refuse("out of memory");
    read_exact(payload, -1, (size_t)plen);
    payload[plen] = 0;
    int in_fd = stdin_file(ilen);
    run_call(id, cap, payload, (size_t)plen, in_fd, ilen > 0);
    if (in_fd >= 0) close(in_fd);
    free(payload);
    if (spare.pid < 0) make_spare();
  }
  cleanup_and_exit(0);
}
