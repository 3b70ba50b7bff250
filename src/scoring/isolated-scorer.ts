import { existsSync, readFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { basename } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ScorerError } from '../errors.js';
import type { ApartAccess, Sandbox } from '../sandbox/types.js';
import { parseCheckOutput, scorerCommand, type CheckContext, type CheckResult } from './check-script.js';

/**
 * Scoring apart from the agent. A root agent owns its container: it can put a fake `python3`
 * first on PATH, replace `/bin/sh`, or sit in the exec channel its commands ran through. So a
 * scorer here never goes through that channel or through anything the container would pick for
 * it:
 *   - ct's own tools (native/ct-score, a static launcher and SHA-256 hasher, and native/ct-sh, a
 *     static busybox shell for sh scorers) and the scorer file are put into a new directory with
 *     an unpredictable name (128 random bits) by the engine itself (`docker cp`): nothing in the
 *     container runs to create it, and nothing there could have known its name;
 *   - the scorer runs in a fresh `docker exec` of ct-score, which gives it a clean environment
 *     (a fixed PATH, the CT_* variables, nothing else from the image or the container: no
 *     LD_PRELOAD, NODE_OPTIONS, PYTHONPATH), its own process group and timeout, and removes the
 *     directory when it ends;
 *   - before the agent's first action and again before scoring, ct-score hashes the container's
 *     interpreters, shells, dynamic loader and libc (and /etc/ld.so.preload): a change is
 *     recorded in the score's metadata (`tampered`, with the paths) and shown in the summary.
 * What a root agent can still do is edit what a scorer reads (the task's files, the libraries an
 * interpreter loads, the tools a shell scorer calls): docs/security.md says so.
 * Sandboxes without `apart` (the local one) and machines where ct-score was not built score as
 * before, through the sandbox's exec.
 */

const NATIVE = (name: string) => fileURLToPath(new URL(`../../native/${name}`, import.meta.url));

/** Paths hashed before the agent acts and again before scoring. */
export const WATCHED_PATHS: readonly string[] = (() => {
  const names = ['sh', 'bash', 'dash', 'ash', 'env', 'python3', 'python', 'node', 'perl', 'ruby'];
  const dirs = ['/usr/local/bin', '/usr/bin', '/bin'];
  return [
    ...dirs.flatMap((d) => names.map((n) => `${d}/${n}`)),
    '/lib64/ld-linux-x86-64.so.2',
    '/lib/x86_64-linux-gnu/libc.so.6',
    '/lib/ld-musl-x86_64.so.1',
    '/etc/ld.so.preload',
  ];
})();

/** How long the hashing may take (a large `node` binary hashes in well under a second). */
const HASH_TIMEOUT_MS = 60_000;
/** Host-side grace past a scorer's own timeout (ct-score kills it at the limit). */
const HOST_GRACE_MS = 10_000;

let tools: { score: Buffer; sh?: Buffer } | null | undefined;

/** ct-score and ct-sh as built on this machine, or undefined where they were not. */
function scoreTools(): { score: Buffer; sh?: Buffer } | undefined {
  if (tools === undefined) {
    try {
      tools = { score: readFileSync(NATIVE('ct-score')), ...(existsSync(NATIVE('ct-sh')) ? { sh: readFileSync(NATIVE('ct-sh')) } : {}) };
    } catch {
      tools = null;
    }
  }
  return tools ?? undefined;
}

/** Why scorers in `sandbox` cannot run apart from the agent, or undefined when they can. */
export function whyNotApart(sandbox: Sandbox): string | undefined {
  if (sandbox.apart === undefined) return `the ${sandbox.describe().split(':')[0]} sandbox has no separate way in`;
  if (scoreTools() === undefined) return 'ct-score was not built on this machine (scripts/build-exec-agent.sh needs a C compiler and x86_64)';
  return undefined;
}

/**
 * The engine could not put ct's files into the sandbox (a read-only root file system, no /tmp):
 * scoring then goes through the sandbox's exec, as where nothing apart is possible.
 */
export class CannotPutError extends Error {}

/** Path -> `sha256 realpath` of the watched files that exist in the sandbox. */
export type Fingerprint = Map<string, string>;

/**
 * One directory of ct's own in a sandbox (ct-score, ct's shell, the scorer files), put there by
 * the engine, and what ct runs from it with fresh execs. The last run removes it.
 */
export class ApartScoring {
  private constructor(
    private readonly apart: ApartAccess,
    readonly dir: string,
    /** Each scorer file given to open(): its name in `dir` and its contents (read once). */
    private readonly scorers: Map<string, { name: string; contents: string }>,
    private readonly hasShell: boolean,
  ) {}

  /** Puts ct-score (and ct's shell and `scorerFiles`, when given) into a new directory. */
  static async open(sandbox: Sandbox, scorerFiles: readonly string[] = []): Promise<ApartScoring> {
    const apart = sandbox.apart!;
    const t = scoreTools()!;
    const dir = `/tmp/ct-score-${randomBytes(16).toString('hex')}`;
    const scorers = new Map<string, { name: string; contents: string }>();
    const files = [{ name: 'ct-score', data: t.score, mode: 0o755 }];
    scorerFiles.forEach((f, i) => {
      const data = readFileSync(f);
      const name = `scorer${i || ''}-${basename(f)}`;
      scorers.set(f, { name, contents: data.toString('utf8') });
      files.push({ name, data, mode: 0o444 });
    });
    const withShell = t.sh !== undefined && [...scorers].some(([f, x]) => isShScorer(scorerCommand(f, x.contents, '/x')));
    if (withShell) files.push({ name: 'sh', data: t.sh!, mode: 0o755 });
    try {
      await apart.putFiles(dir, files);
    } catch (e) {
      throw new CannotPutError((e as Error).message);
    }
    return new ApartScoring(apart, dir, scorers, withShell);
  }

  /** Hashes the watched paths and `extra` ones; `last` removes the directory afterwards. */
  async hash(extra: readonly string[], last: boolean): Promise<Fingerprint> {
    const paths = [...new Set([...WATCHED_PATHS, ...extra])];
    const r = await this.apart.execFresh([`${this.dir}/ct-score`, ...(last ? ['-d', this.dir] : []), 'hash', ...paths], { timeoutMs: HASH_TIMEOUT_MS, user: '0' });
    if (r.code !== 0 || r.timedOut) throw new ScorerError(`hashing the sandbox's interpreters failed (exit ${r.code}): ${r.stderr.trim().slice(0, 500)}`);
    const out: Fingerprint = new Map();
    for (const line of r.stdout.split('\n')) {
      const m = /^H ([0-9a-f]{64}) (\S+) (.+)$/.exec(line);
      if (m) out.set(m[2]!, `${m[1]} ${m[3]}`);
    }
    return out;
  }

  /**
   * Runs one of the scorer files given to open(); `before` (the fingerprint from before the agent
   * acted) resolves interpreters named without a path; `last` removes the directory when it ends.
   */
  async run(file: string, ctx: CheckContext, before: Fingerprint | undefined, last: boolean): Promise<CheckResult> {
    const name = basename(file);
    const scorer = this.scorers.get(file)!;
    let argv = scorerCommand(file, scorer.contents, `${this.dir}/${scorer.name}`);
    // sh scorers run with ct's own static shell; bash, python3, node ones with the container's
    // as they were before the agent acted (and hashed then and now).
    if (this.hasShell && isShScorer(argv)) argv = [`${this.dir}/sh`, ...argv.slice(viaEnv(argv) ? 2 : 1)];
    else argv = resolveFromBefore(argv, before);
    const env = { ...ctx.env, PYTHONNOUSERSITE: '1' };
    const keep = Object.keys(env).join(',');
    const seconds = String(Math.max(1, Math.ceil(ctx.timeoutSeconds)));
    const r = await this.apart.execFresh([`${this.dir}/ct-score`, ...(last ? ['-d', this.dir] : []), 'run', seconds, keep, ...argv], {
      env,
      timeoutMs: ctx.timeoutSeconds * 1000 + HOST_GRACE_MS,
    });
    if (r.timedOut || (r.code === 124 && /ct-score: timed out\s*$/.test(r.stderr))) {
      throw new ScorerError(`scorer ${name} timed out after ${ctx.timeoutSeconds} s`);
    }
    return parseCheckOutput(r.stdout, r.stderr, r.code, name);
  }
}

const viaEnv = (argv: string[]) => argv[0] === '/usr/bin/env' || argv[0] === '/bin/env';

/** Whether a scorer's command runs it with `sh` (ct's own shell then). */
function isShScorer(argv: string[]): boolean {
  const shell = viaEnv(argv) ? argv[1] : argv[0];
  return shell === 'sh' || shell === '/bin/sh' || shell === '/usr/bin/sh';
}

/** Hashes the watched paths (and `extra` ones) with ct-score, run apart from the agent. */
export async function fingerprint(sandbox: Sandbox, extra: readonly string[] = []): Promise<Fingerprint> {
  return (await ApartScoring.open(sandbox)).hash(extra, true);
}

/**
 * The paths whose content, target or presence changed between two fingerprints; of paths that
 * are one file both times (`/bin/sh` and `/usr/bin/sh` where /bin links to /usr/bin), the first.
 */
export function changedPaths(before: Fingerprint, after: Fingerprint): string[] {
  const paths = [...new Set([...before.keys(), ...after.keys()])].sort();
  const seen = new Set<string>();
  return paths.filter((p) => {
    const b = before.get(p);
    const a = after.get(p);
    if (b === a) return false;
    const key = `${b ?? '-'}|${a ?? '-'}`;
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}

/** An absolute interpreter a scorer names in its shebang, to hash along with the watched ones. */
export function scorerInterpreter(file: string): string | undefined {
  let argv: string[];
  try {
    argv = scorerCommand(file, readFileSync(file, 'utf8'), '/x');
  } catch {
    return undefined;
  }
  return argv[0]!.startsWith('/') ? argv[0] : undefined;
}

/**
 * The interpreter a bare name (`python3`, or `/usr/bin/env python3`) meant before the agent
 * acted: the first watched directory holding it then, as its real path. A `python3` the agent
 * put first on PATH afterwards is never run.
 */
export function resolveFromBefore(argv: string[], before: Fingerprint | undefined): string[] {
  if (!before) return argv;
  const bare = (a: string | undefined) => a !== undefined && a !== '' && !a.includes('/') && !a.startsWith('-');
  const lookup = (name: string) => {
    for (const dir of ['/usr/local/bin', '/usr/bin', '/bin']) {
      const hit = before.get(`${dir}/${name}`);
      if (hit) return hit.slice(hit.indexOf(' ') + 1);
    }
    return undefined;
  };
  if (bare(argv[0])) {
    const real = lookup(argv[0]!);
    return real ? [real, ...argv.slice(1)] : argv;
  }
  if ((argv[0] === '/usr/bin/env' || argv[0] === '/bin/env') && bare(argv[1])) {
    const real = lookup(argv[1]!);
    return real ? [real, ...argv.slice(2)] : argv;
  }
  return argv;
}
