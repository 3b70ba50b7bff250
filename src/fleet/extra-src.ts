/**
 * `--extra-src DIR` trees: code besides ct's own that workers need (an external policy or
 * sandbox), each shipped as `{basename}/` and added as an import root on the worker. Packed
 * deterministically, so the same content gives the same sha256 (which enters the fleet id and
 * names the artifact `artifacts/{sha256}.tar.gz`).
 *
 * Not shipped, at any depth: `__pycache__`, `.git`, `node_modules`, `.venv`, `venv`, `build`,
 * `dist` and lockfiles — so a package whose real source lives in a folder named `build` or `dist`
 * will miss those modules on the worker.
 *
 * The tar comes from ct's own ustar writer (src/host/tar.ts): determinism needs control of every
 * header field (mtime 0, owner 0, modes 0644/0755, names in byte order).
 */
import { createHash } from 'node:crypto';
import { lstatSync, readFileSync, readdirSync, readlinkSync, realpathSync, statSync } from 'node:fs';
import { basename, relative, resolve, sep } from 'node:path';
import { gzipSync } from 'node:zlib';
import { ConfigError } from '../errors.js';
import { tarArchive, TarPathError, type TarEntry } from '../host/tar.js';

/** Folder names never shipped (build output, caches, VCS metadata, virtual environments). */
export const EXCLUDED_DIRS: ReadonlySet<string> = new Set(['__pycache__', '.git', 'node_modules', '.venv', 'venv', 'build', 'dist']);

/** Lockfiles never shipped (workers resolve dependencies themselves). */
export const EXCLUDED_FILES: ReadonlySet<string> = new Set([
  'uv.lock', 'poetry.lock', 'Pipfile.lock', 'pdm.lock', 'package-lock.json', 'yarn.lock', 'pnpm-lock.yaml', 'bun.lockb', 'Cargo.lock', 'Gemfile.lock', 'composer.lock',
]);

/** One `--extra-src` tree as given and checked. */
export interface ExtraSrcTree {
  /** The basename: the folder workers unpack it as, and the first part of a `--worker-setup` path. */
  name: string;
  /** Its absolute path on this machine. */
  dir: string;
}

/** A packed tree: the gzip workers download, and the sha256 of the tar inside (platform-independent). */
export interface PackedExtraSrc {
  name: string;
  sha256: string;
  /** Files shipped (relative to the tree). */
  files: string[];
  gzip: Uint8Array;
}

/** Checks `--extra-src` values (existing folders with distinct basenames); a ConfigError before anything is created. */
export function resolveExtraSrc(dirs: readonly string[], cwd: string): ExtraSrcTree[] {
  const seen = new Map<string, string>();
  return dirs.map((d) => {
    const dir = resolve(cwd, d);
    let isDir = false;
    try {
      isDir = statSync(dir).isDirectory();
    } catch {
      throw new ConfigError(`--extra-src ${d}: no such folder (${dir})`);
    }
    if (!isDir) throw new ConfigError(`--extra-src ${d}: not a folder`);
    const name = basename(dir);
    if (!name || EXCLUDED_DIRS.has(name)) throw new ConfigError(`--extra-src ${d}: a folder named "${name}" is never shipped; give its parent or another folder`);
    const other = seen.get(name);
    if (other) throw new ConfigError(`--extra-src ${other} and ${d} have the same basename "${name}"; each tree is unpacked on workers under its basename, so they must differ`);
    seen.set(name, d);
    return { name, dir };
  });
}

/** The files of a tree that ship, relative to it, in byte order of their paths. */
export function shippedFiles(dir: string): string[] {
  const out: string[] = [];
  const walk = (rel: string) => {
    for (const entry of readdirSync(resolve(dir, rel), { withFileTypes: true })) {
      const path = rel ? `${rel}/${entry.name}` : entry.name;
      if (entry.isDirectory()) {
        if (!EXCLUDED_DIRS.has(entry.name)) walk(path);
      } else if ((entry.isFile() || entry.isSymbolicLink()) && !EXCLUDED_FILES.has(entry.name)) {
        out.push(path);
      }
    }
  };
  walk('');
  return out.sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
}

/** Packs a tree as `{name}/...` into a deterministic tar (gzipped for upload). */
export function packExtraSrc(tree: ExtraSrcTree): PackedExtraSrc {
  const files = shippedFiles(tree.dir);
  const entries: TarEntry[] = files.map((rel) => {
    const abs = resolve(tree.dir, rel);
    const st = lstatSync(abs);
    const path = `${tree.name}/${rel}`;
    if (st.isSymbolicLink()) return { path, type: '2', mode: 0o777, link: readlinkSync(abs) };
    return { path, type: '0', mode: st.mode & 0o111 ? 0o755 : 0o644, data: readFileSync(abs) };
  });
  let tar: Buffer;
  try {
    tar = tarArchive(entries);
  } catch (e) {
    if (e instanceof TarPathError) throw new ConfigError(`--extra-src: ${e.message}`);
    throw e;
  }
  return { name: tree.name, sha256: createHash('sha256').update(tar).digest('hex'), files, gzip: gzipSync(tar, { level: 9 }) };
}

/** One hash over several packed trees, in the order given (the fleet id's `extraSrcHash`). */
export function extraSrcHash(packed: readonly PackedExtraSrc[]): string | undefined {
  if (packed.length === 0) return undefined;
  return createHash('sha256').update(packed.map((p) => `${p.name}:${p.sha256}\n`).join('')).digest('hex');
}

/**
 * Checks `--worker-setup <basename>/<path>`: the script must be a shipped file inside one of the
 * extra-src trees. Returns its path as given and the sha256 of its content (for the fleet id).
 */
export function resolveWorkerSetup(spec: string, trees: readonly ExtraSrcTree[]): { path: string; sha256: string } {
  const [name, ...rest] = spec.split('/');
  const tree = trees.find((t) => t.name === name);
  if (!tree || rest.length === 0) {
    const names = trees.map((t) => t.name);
    throw new ConfigError(
      `--worker-setup ${spec} must be <basename>/<path> inside an --extra-src tree` +
        (names.length ? ` (the trees are: ${names.join(', ')})` : '; give the tree holding it with --extra-src'),
    );
  }
  const rel = rest.join('/');
  const abs = resolve(tree.dir, rel);
  let real: string;
  try {
    real = realpathSync(abs);
  } catch {
    throw new ConfigError(`--worker-setup ${spec}: no such file (${abs})`);
  }
  const inside = relative(realpathSync(tree.dir), real);
  if (inside.startsWith('..') || resolve(tree.dir, inside) === resolve(tree.dir) || !statSync(real).isFile()) {
    throw new ConfigError(`--worker-setup ${spec}: must be a file inside --extra-src ${tree.name}`);
  }
  if (!shippedFiles(tree.dir).includes(inside.split(sep).join('/'))) {
    throw new ConfigError(`--worker-setup ${spec}: that file is not shipped (it lies in an excluded folder such as build/, dist/ or .venv/, or is a lockfile)`);
  }
  return { path: `${tree.name}/${inside.split(sep).join('/')}`, sha256: createHash('sha256').update(readFileSync(real)).digest('hex') };
}
