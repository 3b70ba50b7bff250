/*
 * ct-score: what ct runs in a container to score a sample apart from the agent (see
 * ../isolated-scorer.ts). A static binary: it needs nothing from the image, so a container whose
 * shell, interpreters or libc the agent replaced cannot change what it does. The host copies it
 * with the engine (docker cp: nothing in the container runs to put it there) into a directory of
 * its own with an unpredictable name, and runs it with a fresh `docker exec`, never through the
 * agent's exec channel.
 *
 *   ct-score [-d DIR] hash PATH...
 *       For each PATH: `H <sha256> <path> <real path>` when it resolves to a regular file, else
 *       `M <path>`. Symbolic links are followed (the real path is what runs).
 *   ct-score [-d DIR] run SECONDS KEEP ARG...
 *       Runs ARG... with an environment of only PATH (a fixed one), HOME=/root when the caller's
 *       has none, and the variables named in KEEP (comma-separated) from its own environment:
 *       nothing else from the container (no LD_PRELOAD, no profile, no PATH it chose). The command
 *       gets its own process group, killed at exit; past SECONDS (0: no limit) the group is
 *       killed, `ct-score: timed out` goes to stderr and the exit code is 124. Otherwise its exit
 *       code, or 128 + the signal that ended it.
 *
 * -d DIR: a directory of ct's own, removed (its files, then itself) before ct-score exits.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define FIXED_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

static const char *own_dir;

static void remove_own_dir(void) {
  if (!own_dir) return;
  DIR *d = opendir(own_dir);
  if (d) {
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
      if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
      char p[PATH_MAX];
      if (snprintf(p, sizeof p, "%s/%s", own_dir, e->d_name) < (int)sizeof p) unlink(p);
    }
    closedir(d);
  }
  rmdir(own_dir);
}

static void finish(int code) {
  remove_own_dir();
  fflush(stdout);
  _exit(code);
}

/* ------------------------------------------------------------------ SHA-256 (FIPS 180-4) */

static const uint32_t K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

struct sha256 {
  uint32_t h[8];
  uint64_t len;
  unsigned char buf[64];
  size_t n;
};

#define ROR(x, r) (((x) >> (r)) | ((x) << (32 - (r))))

static void sha_block(struct sha256 *s, const unsigned char *p) {
  uint32_t w[64];
  for (int i = 0; i < 16; i++) w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
  for (int i = 16; i < 64; i++) {
    uint32_t s0 = ROR(w[i - 15], 7) ^ ROR(w[i - 15], 18) ^ (w[i - 15] >> 3);
    uint32_t s1 = ROR(w[i - 2], 17) ^ ROR(w[i - 2], 19) ^ (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  uint32_t a = s->h[0], b = s->h[1], c = s->h[2], d = s->h[3], e = s->h[4], f = s->h[5], g = s->h[6], h = s->h[7];
  for (int i = 0; i < 64; i++) {
    uint32_t t1 = h + (ROR(e, 6) ^ ROR(e, 11) ^ ROR(e, 25)) + ((e & f) ^ (~e & g)) + K[i] + w[i];
    uint32_t t2 = (ROR(a, 2) ^ ROR(a, 13) ^ ROR(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
    h = g, g = f, f = e, e = d + t1, d = c, c = b, b = a, a = t1 + t2;
  }
  s->h[0] += a, s->h[1] += b, s->h[2] += c, s->h[3] += d, s->h[4] += e, s->h[5] += f, s->h[6] += g, s->h[7] += h;
}

/*
 * The same compression with the CPU's SHA extensions (x86 SHA-NI), ~5x the portable code: the
 * state is kept as ABEF and CDGH, four rounds per sha256rnds2 pair.
 */
#include <immintrin.h>
static int have_sha_ni;

__attribute__((target("sha,sse4.1"))) static void sha_block_ni(struct sha256 *s, const unsigned char *p) {
  const __m128i bswap = _mm_set_epi64x(0x0c0d0e0f08090a0bULL, 0x0405060700010203ULL);
  __m128i tmp = _mm_loadu_si128((const __m128i *)&s->h[0]);   /* DCBA */
  __m128i st1 = _mm_loadu_si128((const __m128i *)&s->h[4]);   /* HGFE */
  tmp = _mm_shuffle_epi32(tmp, 0xB1);                          /* CDAB */
  st1 = _mm_shuffle_epi32(st1, 0x1B);                          /* EFGH */
  __m128i st0 = _mm_alignr_epi8(tmp, st1, 8);                  /* ABEF */
  st1 = _mm_blend_epi16(st1, tmp, 0xF0);                       /* CDGH */
  __m128i abef = st0, cdgh = st1;
  __m128i m[4];
  for (int i = 0; i < 4; i++) m[i] = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(p + 16 * i)), bswap);
  for (int i = 0; i < 16; i++) {
    __m128i w = m[i & 3];
    __m128i msg = _mm_add_epi32(w, _mm_loadu_si128((const __m128i *)&K[4 * i]));
    st1 = _mm_sha256rnds2_epu32(st1, st0, msg);
    st0 = _mm_sha256rnds2_epu32(st0, st1, _mm_shuffle_epi32(msg, 0x0E));
    if (i < 12) {
      /* The next schedule words: W[i+4] from W[i], W[i+1], W[i+2], W[i+3] (in blocks of four). */
      __m128i next = _mm_sha256msg1_epu32(m[i & 3], m[(i + 1) & 3]);
      next = _mm_add_epi32(next, _mm_alignr_epi8(m[(i + 3) & 3], m[(i + 2) & 3], 4));
      m[i & 3] = _mm_sha256msg2_epu32(next, m[(i + 3) & 3]);
    }
  }
  st0 = _mm_add_epi32(st0, abef);
  st1 = _mm_add_epi32(st1, cdgh);
  tmp = _mm_shuffle_epi32(st0, 0x1B);                          /* FEBA */
  st1 = _mm_shuffle_epi32(st1, 0xB1);                          /* DCHG */
  st0 = _mm_blend_epi16(tmp, st1, 0xF0);                       /* DCBA */
  st1 = _mm_alignr_epi8(st1, tmp, 8);                          /* HGFE */
  _mm_storeu_si128((__m128i *)&s->h[0], st0);
  _mm_storeu_si128((__m128i *)&s->h[4], st1);
}

static void sha_init(struct sha256 *s) {
  static const uint32_t iv[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  memcpy(s->h, iv, sizeof iv);
  s->len = 0;
  s->n = 0;
}

static void block(struct sha256 *s, const unsigned char *p) {
  if (have_sha_ni) sha_block_ni(s, p);
  else sha_block(s, p);
}

static void sha_update(struct sha256 *s, const unsigned char *p, size_t n) {
  s->len += n;
  while (n > 0) {
    if (s->n == 0 && n >= 64) {
      block(s, p);
      p += 64, n -= 64;
      continue;
    }
    size_t take = 64 - s->n < n ? 64 - s->n : n;
    memcpy(s->buf + s->n, p, take);
    s->n += take, p += take, n -= take;
    if (s->n == 64) block(s, s->buf), s->n = 0;
  }
}

static void sha_hex(struct sha256 *s, char out[65]) {
  uint64_t bits = s->len * 8;
  unsigned char pad = 0x80, zero = 0;
  sha_update(s, &pad, 1);
  while (s->n != 56) sha_update(s, &zero, 1);
  unsigned char l[8];
  for (int i = 0; i < 8; i++) l[i] = (unsigned char)(bits >> (56 - 8 * i));
  sha_update(s, l, 8);
  for (int i = 0; i < 8; i++) snprintf(out + 8 * i, 9, "%08x", s->h[i]);
}

static int hash_file(const char *path, char out[65]) {
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) return -1;
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return -1;
  }
  static unsigned char buf[1 << 16];
  struct sha256 s;
  sha_init(&s);
  for (;;) {
    ssize_t r = read(fd, buf, sizeof buf);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      close(fd);
      return -1;
    }
    if (r == 0) break;
    sha_update(&s, buf, (size_t)r);
  }
  close(fd);
  sha_hex(&s, out);
  return 0;
}

static int do_hash(int argc, char **argv) {
  /* Several paths are often one file (/bin/sh and /usr/bin/sh): each real path is hashed once. */
  char **reals = calloc((size_t)argc + 1, sizeof *reals);
  char (*hexes)[65] = calloc((size_t)argc + 1, sizeof *hexes);
  if (!reals || !hexes) return 2;
  for (int i = 0; i < argc; i++) {
    char real[PATH_MAX];
    if (strchr(argv[i], '\n') || !realpath(argv[i], real) || strchr(real, '\n')) {
      printf("M %s\n", argv[i]);
      continue;
    }
    int j = 0;
    while (j < i && !(reals[j] && strcmp(reals[j], real) == 0)) j++;
    if (j == i) {
      if (hash_file(real, hexes[i]) != 0) {
        printf("M %s\n", argv[i]);
        continue;
      }
      reals[i] = strdup(real);
    }
    printf("H %s %s %s\n", hexes[j], argv[i], real);
  }
  return 0;
}

/* ------------------------------------------------------------------ run */

static volatile sig_atomic_t alarmed;
static void on_alarm(int sig) {
  (void)sig;
  alarmed = 1;
}

static int kept(const char *name, size_t len, const char *keep) {
  const char *p = keep;
  while (*p) {
    const char *c = strchr(p, ',');
    size_t n = c ? (size_t)(c - p) : strlen(p);
    if (n == len && strncmp(p, name, n) == 0) return 1;
    if (!c) break;
    p = c + 1;
  }
  return 0;
}

static char **clean_env(const char *keep) {
  extern char **environ;
  size_t count = 0;
  for (char **e = environ; *e; e++) count++;
  char **env = calloc(count + 3, sizeof *env);
  if (!env) return NULL;
  size_t n = 0;
  int home = 0;
  env[n++] = "PATH=" FIXED_PATH;
  for (char **e = environ; *e; e++) {
    const char *eq = strchr(*e, '=');
    if (!eq || eq == *e) continue;
    size_t len = (size_t)(eq - *e);
    if (len == 4 && strncmp(*e, "PATH", 4) == 0) continue;
    if (!kept(*e, len, keep)) continue;
    if (len == 4 && strncmp(*e, "HOME", 4) == 0) home = 1;
    env[n++] = *e;
  }
  if (!home) env[n++] = "HOME=/root";
  env[n] = NULL;
  return env;
}

/* execve over the fixed PATH (execvpe would read the PATH of the caller's environment). */
static void exec_fixed(char **argv, char **env) {
  if (strchr(argv[0], '/')) {
    execve(argv[0], argv, env);
    return;
  }
  const char *p = FIXED_PATH;
  while (*p) {
    const char *c = strchr(p, ':');
    size_t n = c ? (size_t)(c - p) : strlen(p);
    char full[PATH_MAX];
    if (snprintf(full, sizeof full, "%.*s/%s", (int)n, p, argv[0]) < (int)sizeof full) execve(full, argv, env);
    if (!c) break;
    p = c + 1;
  }
}

static int do_run(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "ct-score: run needs SECONDS KEEP ARG...\n");
    return 2;
  }
  char *end;
  long seconds = strtol(argv[0], &end, 10);
  if (*end || seconds < 0) {
    fprintf(stderr, "ct-score: bad timeout %s\n", argv[0]);
    return 2;
  }
  char **env = clean_env(argv[1]);
  if (!env) return 2;
  fflush(stdout);
  pid_t pid = fork();
  if (pid < 0) {
    perror("ct-score: fork");
    return 2;
  }
  if (pid == 0) {
    setpgid(0, 0);
    if (own_dir) {
      /* The command must not run from ct's directory, nor see it in its working directory. */
      if (chdir("/") != 0) _exit(126);
    }
    exec_fixed(argv + 2, env);
    fprintf(stderr, "ct-score: cannot run %s: %s\n", argv[2], strerror(errno));
    _exit(errno == ENOENT ? 127 : 126);
  }
  setpgid(pid, pid);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_alarm;
  sigaction(SIGALRM, &sa, NULL);
  if (seconds > 0) alarm((unsigned)seconds);
  int status = 0;
  for (;;) {
    pid_t w = waitpid(pid, &status, 0);
    if (w == pid) break;
    if (w < 0 && errno == EINTR && alarmed) {
      kill(-pid, SIGKILL);
      kill(pid, SIGKILL);
      while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      fprintf(stderr, "\nct-score: timed out\n");
      return 124;
    }
    if (w < 0 && errno != EINTR) return 2;
  }
  kill(-pid, SIGKILL);
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 2;
}

int main(int argc, char **argv) {
  __builtin_cpu_init();
  have_sha_ni = __builtin_cpu_supports("sha") && __builtin_cpu_supports("sse4.1") && !getenv("CT_SCORE_NO_SHA_NI");
  int i = 1;
  if (i + 1 < argc && strcmp(argv[i], "-d") == 0) {
    own_dir = argv[i + 1];
    i += 2;
  }
  if (i < argc && strcmp(argv[i], "-p") == 0) finish(0);
  if (i < argc && strcmp(argv[i], "hash") == 0) finish(do_hash(argc - i - 1, argv + i + 1));
  if (i < argc && strcmp(argv[i], "run") == 0) finish(do_run(argc - i - 1, argv + i + 1));
  fprintf(stderr, "usage: ct-score [-d DIR] hash PATH... | run SECONDS KEEP ARG...\n");
  finish(2);
}
