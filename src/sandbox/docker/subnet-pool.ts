import { ConfigError } from '../../errors.js';

/** Prefix length of one sample network taken from the pool: 64 addresses. */
export const SAMPLE_NETWORK_PREFIX = 26;

/**
 * Ranges a pool may come from: addresses that are never routed on the internet, so a sandbox
 * given one cannot shadow a real host. RFC 1918 private space, the shared space of RFC 6598 (also
 * used by carrier NAT and some VPNs: pick it only where nothing else on the machine uses it), and
 * the benchmarking range of RFC 2544.
 */
const NON_ROUTABLE: ReadonlyArray<{ cidr: string; base: number; bits: number }> = [
  ['10.0.0.0', 8],
  ['172.16.0.0', 12],
  ['192.168.0.0', 16],
  ['100.64.0.0', 10],
  ['198.18.0.0', 15],
].map(([a, bits]) => ({ cidr: `${a}/${bits}`, base: toInt(String(a).split('.').map(Number)), bits: Number(bits) }));

/** An IPv4 range: its first address as an unsigned int and its prefix length. */
export interface Ipv4Range {
  base: number;
  bits: number;
}

/**
 * Parses and checks a network pool (`sandbox.network_pool`, CT_NETWORK_POOL): an IPv4 CIDR with
 * no host bits, inside one non-routable range, holding at least one /26. Returns the range, or
 * the reason it cannot be used (a sentence naming the value).
 */
export function parseNetworkPool(cidr: string): Ipv4Range | { problem: string } {
  const m = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})\/(\d{1,2})$/.exec(cidr.trim());
  if (!m) return { problem: `"${cidr}" is not an IPv4 range like 10.213.0.0/16 (or \`docker\` to let Docker choose)` };
  const octets = m.slice(1, 5).map(Number);
  const bits = Number(m[5]);
  if (octets.some((o) => o > 255) || bits > 32) return { problem: `"${cidr}" is not a valid IPv4 range (octets 0-255, prefix 0-32)` };
  const base = toInt(octets);
  const mask = bits === 0 ? 0 : (0xffffffff << (32 - bits)) >>> 0;
  if ((base & mask) >>> 0 !== base) {
    return { problem: `"${cidr}" has host bits set; did you mean ${fromInt((base & mask) >>> 0)}/${bits}?` };
  }
  const inside = NON_ROUTABLE.find((r) => bits >= r.bits && ((base ^ r.base) >>> (32 - r.bits)) === 0);
  if (!inside) {
    return {
      problem: `${cidr} is not a private range: sandboxes would get addresses that belong to real hosts. Use one inside ${NON_ROUTABLE.map((r) => r.cidr).join(', ')}`,
    };
  }
  if (bits > SAMPLE_NETWORK_PREFIX) {
    return { problem: `${cidr} is smaller than one sample network (/${SAMPLE_NETWORK_PREFIX}, 64 addresses); use a /${SAMPLE_NETWORK_PREFIX} or wider` };
  }
  return { base, bits };
}

/** The reason a `sandbox.network_pool` value cannot be used, for the config schema; undefined when fine. */
export function networkPoolProblem(value: string): string | undefined {
  if (value === 'docker') return undefined;
  const r = parseNetworkPool(value);
  return 'problem' in r ? `${r.problem} (set by CT_NETWORK_POOL or sandbox.network_pool in ct.config.yml)` : undefined;
}

/**
 * Hands out subnets for sample networks from a pool ct owns (default 10.213.0.0/16 in /26
 * blocks: 1024 networks). Docker's own default pools run out at about 30 bridge networks, so
 * many concurrent samples would otherwise fail to start. Picks are random so several ct
 * processes rarely collide; a collision surfaces as Docker's "Pool overlaps" error and the
 * provider retries with fresh picks.
 */
export class SubnetPool {
  private readonly base: number;
  private readonly count: number;
  private readonly inUse = new Set<number>();
  private readonly prefix = SAMPLE_NETWORK_PREFIX;

  constructor(cidr: string) {
    const r = parseNetworkPool(cidr);
    if ('problem' in r) throw new ConfigError(`network pool ${r.problem}`);
    this.base = r.base;
    this.count = 2 ** (this.prefix - r.bits);
  }

  take(): { subnet: string; release: () => void } {
    if (this.inUse.size >= this.count) throw new ConfigError('the sample network pool is exhausted; widen sandbox.network_pool');
    let i: number;
    do i = Math.floor(Math.random() * this.count);
    while (this.inUse.has(i));
    this.inUse.add(i);
    const addr = (this.base + i * 2 ** (32 - this.prefix)) >>> 0;
    return { subnet: `${fromInt(addr)}/${this.prefix}`, release: () => this.inUse.delete(i) };
  }
}

function toInt(octets: number[]): number {
  return (((octets[0]! << 24) | (octets[1]! << 16) | (octets[2]! << 8) | octets[3]!) >>> 0);
}

function fromInt(addr: number): string {
  return `${addr >>> 24}.${(addr >>> 16) & 255}.${(addr >>> 8) & 255}.${addr & 255}`;
}
