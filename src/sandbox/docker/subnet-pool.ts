import { ConfigError } from '../../errors.js';

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

  constructor(
    cidr: string,
    private readonly prefix = 26,
  ) {
    const m = /^(\d+)\.(\d+)\.(\d+)\.(\d+)\/(\d+)$/.exec(cidr);
    if (!m) throw new ConfigError(`network pool "${cidr}" is not an IPv4 CIDR like 10.213.0.0/16`);
    const [a, b, c, d, bits] = m.slice(1).map(Number) as [number, number, number, number, number];
    if (bits > prefix) throw new ConfigError(`network pool ${cidr} is smaller than one /${prefix} network`);
    this.base = ((a << 24) | (b << 16) | (c << 8) | d) >>> 0;
    this.count = 2 ** (prefix - bits);
  }

  take(): { subnet: string; release: () => void } {
    if (this.inUse.size >= this.count) throw new ConfigError('the sample network pool is exhausted; widen sandbox.network_pool');
    let i: number;
    do i = Math.floor(Math.random() * this.count);
    while (this.inUse.has(i));
    this.inUse.add(i);
    const addr = (this.base + i * 2 ** (32 - this.prefix)) >>> 0;
    const subnet = `${addr >>> 24}.${(addr >>> 16) & 255}.${(addr >>> 8) & 255}.${addr & 255}/${this.prefix}`;
    return { subnet, release: () => this.inUse.delete(i) };
  }
}
