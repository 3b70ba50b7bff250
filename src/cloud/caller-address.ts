import { isIP } from 'node:net';
import { ConfigError } from '../errors.js';

/** How long the what-is-my-IP service may take. */
const LOOKUP_TIMEOUT_MS = 10_000;

/** Checks an IPv4 or IPv6 CIDR such as 203.0.113.7/32. */
export function parseCidr(cidr: string): { cidr: string; version: 4 | 6 } {
  const m = /^(.+)\/(\d{1,3})$/.exec(cidr.trim());
  const version = m ? isIP(m[1]!) : 0;
  if (!m || version === 0 || Number(m[2]) > (version === 4 ? 32 : 128)) {
    throw new ConfigError(`"${cidr}" is not a CIDR like 203.0.113.7/32`);
  }
  return { cidr: `${m[1]}/${m[2]}`, version: version as 4 | 6 };
}

/**
 * The source range allowed to SSH into the instance: `explicit` (`--ssh-cidr`) when given,
 * else the caller's own public address as a single-host range, asked from `url` (a service that
 * answers with the address as plain text, default https://checkip.amazonaws.com).
 */
export async function sshSourceCidr(options: { explicit?: string; url: string }): Promise<{ cidr: string; version: 4 | 6 }> {
  if (options.explicit) return parseCidr(options.explicit);
  let text: string;
  try {
    const r = await fetch(options.url, { signal: AbortSignal.timeout(LOOKUP_TIMEOUT_MS) });
    if (!r.ok) throw new Error(`HTTP ${r.status}`);
    text = (await r.text()).trim();
  } catch (e) {
    throw new ConfigError(
      `cannot find your public IP address from ${options.url} (${(e as Error).message}); ` +
        'pass --ssh-cidr YOUR.IP/32 (or set ec2.my_ip_url to a service that answers with your address)',
    );
  }
  const version = isIP(text);
  if (version === 0) {
    throw new ConfigError(`${options.url} answered "${text.slice(0, 60)}", not an IP address; pass --ssh-cidr YOUR.IP/32`);
  }
  return { cidr: `${text}/${version === 4 ? 32 : 128}`, version: version as 4 | 6 };
}
