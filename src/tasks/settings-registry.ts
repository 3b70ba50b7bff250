import { existsSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { isAbsolute, join, resolve } from 'node:path';
import { isMap, parseDocument, type Document } from 'yaml';
import { SETTING_NAME, settingEntrySchema, type Config, type SettingEntry } from '../config/config.js';
import { ConfigError } from '../errors.js';
import type { GitCredential } from './git-runner.js';
import { redact } from './redact.js';

/** The project's config file and the per-user one that overrides it (git-ignored). */
export const CONFIG_FILE = 'ct.config.yml';
export const LOCAL_CONFIG_FILE = 'ct.config.local.yml';

/** A registry entry with its name. */
export interface SettingSpec extends SettingEntry {
  name: string;
  repo: string;
}

/** Where git fetches a repository from, with any credentials taken out of its URL. */
export interface RepoLocation {
  /** The repository as recorded (lock file, status): the configured value minus credentials. */
  display: string;
  /** What git is given: `display`, with a relative local path made absolute. */
  gitUrl: string;
  credentials: GitCredential[];
}

/** The named settings of ct.config.yml (with ct.config.local.yml layered on top). */
export class SettingsRegistry {
  constructor(
    private readonly config: Config,
    readonly projectRoot: string,
  ) {}

  /** Settings that can be pulled (entries with a `repo`; an entry may only set `trust`). */
  names(): string[] {
    return Object.keys(this.config.settings)
      .filter((n) => this.has(n))
      .sort();
  }

  has(name: string): boolean {
    return Object.hasOwn(this.config.settings, name) && this.config.settings[name]!.repo !== undefined;
  }

  /** The entry for NAME; an unknown name is a ConfigError listing the known ones. */
  get(name: string): SettingSpec {
    if (!this.has(name)) throw this.unknown(name);
    const entry = this.config.settings[name]!;
    return { name, ...entry, repo: entry.repo! };
  }

  unknown(name: string, extraKnown: string[] = []): ConfigError {
    const known = [...new Set([...this.names(), ...extraKnown])].sort();
    const isDefault = name === this.config.default_setting ? ' (the default_setting)' : '';
    if (Object.hasOwn(this.config.settings, name)) {
      return new ConfigError(`setting "${name}" has no repo: in ${CONFIG_FILE} (its entry only sets trust), so it cannot be pulled; add \`repo: URL\` to it`);
    }
    return new ConfigError(
      `unknown setting "${name}"${isDefault}; known settings: ${known.join(', ') || `(none; add one with \`ct settings add NAME REPO\`)`}`,
    );
  }

  get defaultSetting(): string {
    return this.config.default_setting;
  }

  /** Splits `NAME[@REF]`; no NAME means the default setting. */
  parseTarget(target: string | undefined): { name: string; ref?: string } {
    if (!target) return { name: this.config.default_setting };
    const at = target.indexOf('@');
    const name = at < 0 ? target : target.slice(0, at);
    const ref = at < 0 ? undefined : target.slice(at + 1);
    checkName(name);
    if (ref !== undefined) checkRef(ref);
    return { name, ref };
  }
}

export function checkName(name: string): void {
  if (!SETTING_NAME.test(name)) throw new ConfigError(`"${name}" is not a valid setting name (letters, digits, . _ -; not starting with . _ -)`);
}

/** Refs come from the user and are handed to git as arguments, so no option-like or odd ones. */
export function checkRef(ref: string): void {
  if (!ref || ref.startsWith('-') || /[\s~^:?*[\\\0]|\.\.|@\{/.test(ref)) {
    throw new ConfigError(`"${ref}" is not a valid ref (a branch, tag or commit)`);
  }
}

/**
 * Takes credentials out of a repository URL (`https://user:token@host/...` becomes
 * `https://host/...` plus a credential for `https://host`), so they are never written into
 * .git/config or the lock file. Relative local paths resolve against the project root.
 */
export function locateRepo(repo: string, projectRoot: string): RepoLocation {
  if (repo.startsWith('-')) throw new ConfigError(`repository "${redact(repo)}" cannot start with "-"`);
  if (!/^[A-Za-z][A-Za-z0-9+.-]*:\/\//.test(repo)) {
    // A local path, or an scp-like `user@host:path` (whose user is an SSH login, not a secret).
    const scpLike = /^[^/]+:/.test(repo) && !/^[A-Za-z]:[\\/]/.test(repo);
    return { display: repo, gitUrl: scpLike || isAbsolute(repo) ? repo : resolve(projectRoot, repo), credentials: [] };
  }
  let url: URL;
  try {
    url = new URL(repo);
  } catch {
    throw new ConfigError(`repository "${redact(repo)}" is not a valid URL`);
  }
  if (!url.username && !url.password) return { display: repo, gitUrl: repo, credentials: [] };
  const scheme = url.protocol.replace(/:$/, '');
  if (scheme !== 'http' && scheme !== 'https') {
    if (url.password) throw new ConfigError(`repository ${redact(repo)}: a ${scheme} URL cannot carry a password; use an SSH key or agent`);
    return { display: repo, gitUrl: repo, credentials: [] };
  }
  const credentials = [
    { prefix: `${url.protocol}//${url.host}`, username: decodeURIComponent(url.username), password: decodeURIComponent(url.password) },
  ];
  url.username = '';
  url.password = '';
  const clean = url.toString();
  return { display: clean, gitUrl: clean, credentials };
}

/** Adds or replaces a registry entry in ct.config.yml (or ct.config.local.yml), keeping the file's other content and comments. */
export function writeSettingEntry(
  projectRoot: string,
  name: string,
  entry: SettingEntry & { repo: string },
  o: { local?: boolean } = {},
): { file: string; replaced: boolean } {
  checkName(name);
  const r = settingEntrySchema.safeParse(entry);
  if (!r.success) throw new ConfigError(`setting ${name}: ${r.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
  if (entry.ref !== undefined) checkRef(entry.ref);
  const loc = locateRepo(entry.repo, projectRoot);
  if (loc.credentials.length > 0) {
    throw new ConfigError(
      `repository ${redact(entry.repo)} carries credentials; config files are shared, so give the URL without them and put the token in GH_TOKEN`,
    );
  }
  const file = join(projectRoot, o.local ? LOCAL_CONFIG_FILE : CONFIG_FILE);
  const doc = readDocument(file);
  if (!isMap(doc.get('settings'))) doc.set('settings', doc.createNode({}));
  const replaced = doc.hasIn(['settings', name]);
  // Replacing the repository keeps what the entry trusts: trust is the user's, not the repository's.
  const kept = doc.getIn(['settings', name, 'trust']);
  const node: Record<string, unknown> = { repo: entry.repo };
  if (entry.ref !== undefined) node.ref = entry.ref;
  if (entry.envs?.length) node.envs = entry.envs;
  if (entry.trust?.length) node.trust = entry.trust;
  else if (kept !== undefined) node.trust = kept;
  doc.setIn(['settings', name], doc.createNode(node));
  writeDocument(file, doc);
  return { file, replaced };
}

/** Removes NAME from both config files; returns the files that had it. */
export function deleteSettingEntry(projectRoot: string, name: string): string[] {
  const changed: string[] = [];
  for (const f of [CONFIG_FILE, LOCAL_CONFIG_FILE]) {
    const file = join(projectRoot, f);
    if (!existsSync(file)) continue;
    const doc = readDocument(file);
    if (!doc.hasIn(['settings', name])) continue;
    doc.deleteIn(['settings', name]);
    writeDocument(file, doc);
    changed.push(file);
  }
  return changed;
}

function readDocument(file: string): Document {
  const text = existsSync(file) ? readFileSync(file, 'utf8') : '';
  const doc = parseDocument(text);
  if (doc.errors.length) throw new ConfigError(`${file}: not valid YAML: ${doc.errors[0]!.message}`);
  if (doc.contents === null) doc.contents = doc.createNode({}) as unknown as typeof doc.contents;
  if (!isMap(doc.contents)) throw new ConfigError(`${file}: the top level is not a mapping`);
  return doc;
}

function writeDocument(file: string, doc: Document): void {
  // Written beside the target, then renamed: an interrupted write never leaves half a file.
  const tmp = `${file}.tmp-${process.pid}`;
  writeFileSync(tmp, doc.toString());
  renameSync(tmp, file);
}
