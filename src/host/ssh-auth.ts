import { existsSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import ssh2 from 'ssh2';
import { ConfigError } from '../errors.js';

/** What an SSH connection may authenticate with, tried in order: the agent, then each key. */
export interface SshAuth {
  /** Path of the ssh-agent socket (SSH_AUTH_SOCK). */
  agent?: string;
  keys: Array<{ source: string; key: Buffer }>;
  /** Keys found but skipped (encrypted), for the error message when nothing works. */
  skipped: string[];
}

const { utils } = ssh2;

/** The default identity files, as ssh tries them. */
const DEFAULT_KEYS = ['id_ed25519', 'id_rsa'];

/**
 * The user's SSH credentials: with `keyFile` (`--ssh-key`) that key alone; otherwise the agent
 * (when its socket is given) and `~/.ssh/id_ed25519`, `~/.ssh/id_rsa`. Keys protected by a
 * passphrase are used through the agent only; ct never asks for passphrases.
 */
export function discoverSshAuth(options: { keyFile?: string; agent?: string; home?: string }): SshAuth {
  if (options.keyFile) {
    let key: Buffer;
    try {
      key = readFileSync(options.keyFile);
    } catch (e) {
      throw new ConfigError(`cannot read SSH key ${options.keyFile}: ${(e as Error).message}`);
    }
    const parsed = utils.parseKey(key);
    if (parsed instanceof Error) {
      if (/encrypted|passphrase/i.test(parsed.message)) {
        throw new ConfigError(
          `SSH key ${options.keyFile} is protected by a passphrase; load it into your agent (\`ssh-add ${options.keyFile}\`) and run without --ssh-key`,
        );
      }
      throw new ConfigError(`${options.keyFile} is not an SSH private key ct can read: ${parsed.message}`);
    }
    return { keys: [{ source: options.keyFile, key }], skipped: [] };
  }
  const auth: SshAuth = { keys: [], skipped: [] };
  if (options.agent && existsSync(options.agent)) auth.agent = options.agent;
  const dir = join(options.home ?? homedir(), '.ssh');
  for (const name of DEFAULT_KEYS) {
    const file = join(dir, name);
    let key: Buffer;
    try {
      key = readFileSync(file);
    } catch {
      continue;
    }
    const parsed = utils.parseKey(key);
    if (parsed instanceof Error) auth.skipped.push(`${file} (${/encrypted|passphrase/i.test(parsed.message) ? 'needs a passphrase' : 'unreadable'})`);
    else auth.keys.push({ source: file, key });
  }
  return auth;
}

/** A readable list of what was offered, for error messages. */
export function describeAuth(auth: SshAuth): string {
  const parts = [...(auth.agent ? ['ssh-agent'] : []), ...auth.keys.map((k) => k.source)];
  const tried = parts.length ? parts.join(', ') : 'nothing (no agent, no ~/.ssh/id_ed25519 or id_rsa)';
  return auth.skipped.length ? `${tried}; skipped ${auth.skipped.join(', ')}` : tried;
}
