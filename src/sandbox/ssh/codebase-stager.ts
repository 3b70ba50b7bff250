import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { lstatSync, readFileSync, readdirSync, readlinkSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { SandboxUnavailableError } from '../../errors.js';
import type { CommandRunner } from '../../host/command-runner.js';
import { lastLines } from '../docker/docker-cli.js';
import type { SandboxEnvSpec } from '../types.js';

/** Never shipped: version-control metadata is large and compose never reads it. */
const SKIP = new Set(['.git']);
/** Written last into a staged folder; its presence means the folder is complete. */
const COMPLETE_MARK = '.ct-complete';

/**
 * A content hash of a folder: relative paths, file types, executable bits, file contents and
 * symlink targets, in sorted order. Equal hashes mean equal trees, so a host that already has
 * the hash needs nothing sent.
 */
export function hashTree(root: string): string {
  const h = createHash('sha256');
  const walk = (rel: string) => {
    const names = readdirSync(join(root, rel)).filter((n) => !SKIP.has(n)).sort();
    for (const name of names) {
      const path = rel ? `${rel}/${name}` : name;
      const full = join(root, path);
      const st = lstatSync(full);
      if (st.isSymbolicLink()) h.update(`l\0${path}\0${readlinkSync(full)}\0`);
      else if (st.isDirectory()) {
        h.update(`d\0${path}\0`);
        walk(path);
      } else if (st.isFile()) {
        h.update(`f\0${path}\0${st.mode & 0o111 ? 'x' : '-'}\0${st.size}\0`);
        h.update(readFileSync(full));
      }
    }
  };
  walk('');
  return h.digest('hex');
}

/** `sh -c STAGE sh FINAL`: unpacks a tar stream from stdin into FINAL, atomically. */
const STAGE = `set -e
final=$1
if [ -f "$final/${COMPLETE_MARK}" ]; then cat >/dev/null; exit 0; fi
tmp="$final.tmp.$$"
rm -rf "$tmp"
mkdir -p "$tmp"
tar -x --no-same-owner -f - -C "$tmp"
touch "$tmp/${COMPLETE_MARK}"
if [ -f "$final/${COMPLETE_MARK}" ]; then rm -rf "$tmp"; exit 0; fi
rm -rf "$final"
mv "$tmp" "$final"`;

/**
 * Ships an environment's compose folder (the `codebase/` that holds compose.yml and its build
 * contexts) to a remote Docker host, once per folder content per host: it lands in
 * `<remote home>/.ct/envs/<hash>/` and later runs with the same content reuse it. Compose then
 * resolves `build:` and bind-mount paths on the remote host as it would locally.
 * The tree travels as one tar stream on one channel (local `tar`, remote `tar`).
 */
export class CodebaseStager {
  private readonly staged = new Map<string, Promise<string>>();

  constructor(
    private readonly runner: CommandRunner,
    private readonly remoteRoot: () => Promise<string>,
  ) {}

  /** The remote path of the environment's compose file, shipping its folder when missing. */
  stage(env: SandboxEnvSpec): Promise<string> {
    const dir = dirname(env.composeFile);
    let p = this.staged.get(dir);
    if (!p) {
      p = this.ship(dir).then((remoteDir) => `${remoteDir}/${basename(env.composeFile)}`);
      this.staged.set(dir, p);
      p.catch(() => this.staged.delete(dir));
    }
    return p;
  }

  private async ship(dir: string): Promise<string> {
    const hash = hashTree(dir).slice(0, 20);
    const remoteDir = `${await this.remoteRoot()}/${hash}`;
    const check = await this.runner.run(['test', '-f', `${remoteDir}/${COMPLETE_MARK}`], { timeoutMs: 30_000 });
    if (check.code === 0) return remoteDir;
    const proc = await this.runner.start(['sh', '-c', STAGE, 'sh', remoteDir]);
    let remoteErr = '';
    proc.stderr.on('data', (c: Buffer) => (remoteErr += c.toString('utf8')));
    proc.stdout.resume();
    const excludes = [...SKIP].map((n) => `--exclude=./${n}`);
    // COPYFILE_DISABLE keeps macOS tar from adding AppleDouble (._*) entries.
    const tar = spawn('tar', ['-C', dir, ...excludes, '-cf', '-', '.'], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, COPYFILE_DISABLE: '1' },
    });
    let localErr = '';
    tar.stderr.on('data', (c: Buffer) => (localErr += c.toString('utf8')));
    tar.stdout.pipe(proc.stdin);
    const [localCode, remoteCode] = await Promise.all([
      new Promise<number | null>((resolve) => {
        tar.on('error', (e) => {
          localErr += e.message;
          proc.stdin.end();
          resolve(-1);
        });
        tar.on('close', resolve);
      }),
      proc.exited,
    ]);
    if (localCode !== 0) throw new SandboxUnavailableError(`packing ${dir} with tar failed: ${lastLines(localErr, 4)}`);
    if (remoteCode !== 0) {
      throw new SandboxUnavailableError(`unpacking ${basename(dirname(dir))}/${basename(dir)} on ${this.runner.target} failed: ${lastLines(remoteErr, 4)}`);
    }
    return remoteDir;
  }
}
