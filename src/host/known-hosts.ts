import { createHash } from 'node:crypto';
import { appendFileSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { ConfigError } from '../errors.js';

/** Refusal to talk to a host whose key differs from the one recorded on first use. */
export class HostKeyChangedError extends ConfigError {}

/** How a host is named in the file: `host` on port 22, `[host]:port` otherwise (OpenSSH's form). */
export function knownHostName(host: string, port: number): string {
  return port === 22 ? host : `[${host}]:${port}`;
}

/** `SHA256:...` as `ssh-keygen -l` prints it. */
export function fingerprint(keyBlob: Buffer): string {
  return `SHA256:${createHash('sha256').update(keyBlob).digest('base64').replace(/=+$/, '')}`;
}

/** The algorithm name at the start of an SSH public key blob (`ssh-ed25519`, ...). */
export function keyType(keyBlob: Buffer): string {
  if (keyBlob.length < 4) return 'unknown';
  const n = keyBlob.readUInt32BE(0);
  return keyBlob.subarray(4, 4 + n).toString('latin1');
}

interface Entry {
  name: string;
  type: string;
  blob: string;
  line: number;
}

/**
 * ct's own known-hosts file (default `<state_dir>/known_hosts`, in OpenSSH's plain format, so
 * `ssh -o UserKnownHostsFile=...` can read it too). Trust on first use: an unknown host's key is
 * recorded; a known host offering a different key is refused. ct keeps its own file rather than
 * writing to ~/.ssh/known_hosts so it never changes what the user's ssh trusts.
 */
export class KnownHosts {
  constructor(readonly file: string) {}

  private entries(): Entry[] {
    let text: string;
    try {
      text = readFileSync(this.file, 'utf8');
    } catch {
      return [];
    }
    const out: Entry[] = [];
    text.split('\n').forEach((raw, i) => {
      const line = raw.trim();
      if (!line || line.startsWith('#')) return;
      const [names, type, blob] = line.split(/\s+/);
      if (!names || !type || !blob) return;
      for (const name of names.split(',')) out.push({ name, type, blob, line: i + 1 });
    });
    return out;
  }

  /** Key types recorded for a host, so the handshake can ask for the one already known. */
  knownTypes(name: string): string[] {
    return [...new Set(this.entries().filter((e) => e.name === name).map((e) => e.type))];
  }

  /**
   * Accepts the key when it is the recorded one, records it when the host is new, and throws
   * HostKeyChangedError when the host is known under a different key.
   */
  verify(name: string, keyBlob: Buffer): 'known' | 'recorded' {
    const type = keyType(keyBlob);
    const blob = keyBlob.toString('base64');
    const mine = this.entries().filter((e) => e.name === name);
    if (mine.some((e) => e.type === type && e.blob === blob)) return 'known';
    if (mine.length > 0) {
      const old = mine.find((e) => e.type === type) ?? mine[0]!;
      throw new HostKeyChangedError(
        `the SSH host key of ${name} has changed: ct recorded ${old.type} ${fingerprint(Buffer.from(old.blob, 'base64'))}, ` +
          `the host now offers ${type} ${fingerprint(keyBlob)}. This can mean someone is intercepting the connection. ` +
          `If you know the host was reinstalled, delete line ${old.line} of ${this.file} and run again.`,
      );
    }
    mkdirSync(dirname(this.file), { recursive: true, mode: 0o700 });
    appendFileSync(this.file, `${name} ${type} ${blob}\n`, { mode: 0o600 });
    return 'recorded';
  }

  /** Drops a host's lines (e.g. an EC2 instance that was terminated: its name never returns). */
  forget(name: string): void {
    let text: string;
    try {
      text = readFileSync(this.file, 'utf8');
    } catch {
      return;
    }
    const kept = text.split('\n').filter((l) => {
      const names = l.trim().split(/\s+/)[0];
      return !names || !names.split(',').includes(name);
    });
    writeFileSync(this.file, kept.join('\n'), { mode: 0o600 });
  }
}
