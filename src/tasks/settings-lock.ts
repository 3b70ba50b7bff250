import { existsSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse, stringify } from 'yaml';
import { z } from 'zod';
import { SETTING_NAME } from '../config/config.js';
import { ConfigError } from '../errors.js';

/** The lock file at the project root; committed, so every machine pulls the same commits. */
export const LOCK_FILE = '.settings.lock.yml';

const lockEntrySchema = z
  .object({
    /** The repository without credentials, as in ct.config.yml. */
    repo: z.string().min(1),
    /** What was asked for: a branch, tag or commit, or HEAD for the default branch. */
    ref: z.string().min(1),
    /** The full commit the ref resolved to. */
    commit: z.string().regex(/^[0-9a-f]{40}([0-9a-f]{24})?$/, 'not a full commit hash'),
  })
  .strict();

export type LockEntry = z.infer<typeof lockEntrySchema>;

const lockSchema = z.record(z.string().regex(SETTING_NAME, 'not a valid setting name'), lockEntrySchema);

const HEADER =
  '# Written by `ct settings pull`: the commit each setting resolved to.\n' +
  '# Commit this file; `ct settings pull --locked` checks out exactly these commits.\n';

/** `.settings.lock.yml`: setting name -> {repo, ref, commit}. */
export class SettingsLock {
  private constructor(
    readonly file: string,
    private readonly entries: Map<string, LockEntry>,
  ) {}

  /** Reads the lock file of a project; a missing file is an empty lock. */
  static read(projectRoot: string): SettingsLock {
    const file = join(projectRoot, LOCK_FILE);
    if (!existsSync(file)) return new SettingsLock(file, new Map());
    let raw: unknown;
    try {
      raw = parse(readFileSync(file, 'utf8'));
    } catch (e) {
      throw new ConfigError(`${file}: not valid YAML: ${(e as Error).message}`);
    }
    const r = lockSchema.safeParse(raw ?? {});
    if (!r.success) {
      throw new ConfigError(`${file}: ${r.error.issues.map((i) => `${i.path.join('.') || '(file)'}: ${i.message}`).join('; ')}`);
    }
    return new SettingsLock(file, new Map(Object.entries(r.data)));
  }

  names(): string[] {
    return [...this.entries.keys()].sort();
  }

  get(name: string): LockEntry | undefined {
    return this.entries.get(name);
  }

  set(name: string, entry: LockEntry): void {
    this.entries.set(name, { repo: entry.repo, ref: entry.ref, commit: entry.commit });
  }

  delete(name: string): boolean {
    return this.entries.delete(name);
  }

  /** Writes the file (sorted by name) through a temporary file and a rename. */
  write(): void {
    const body = Object.fromEntries(this.names().map((n) => [n, this.entries.get(n)!]));
    const tmp = `${this.file}.tmp`;
    writeFileSync(tmp, HEADER + (this.entries.size ? stringify(body) : '{}\n'));
    renameSync(tmp, this.file);
  }
}
