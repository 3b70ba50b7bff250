/**
 * EC2 prices for estimates and `ct cloud status`: the table in data/ec2-prices.json (instance
 * type -> vCPU, memory, on-demand USD/h per region; one typical spot fraction; its as-of date and
 * source), with config `fleet.prices` (USD/h by type) and `--price` / `fleet.price_per_hour`
 * winning over it. No price API is called: the table is kept in the repository and refreshed by
 * hand, so estimates work offline and never depend on an account's Pricing API access.
 */
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import { ConfigError } from '../errors.js';

const priceTableSchema = z.object({
  as_of: z.string(),
  source: z.string(),
  /** Spot price as a fraction of on demand (typical, not a quote). */
  spot_fraction: z.number().positive().max(1),
  types: z.record(
    z.string(),
    z.object({ vcpu: z.number().int().positive(), memory_gib: z.number().positive(), usd_per_hour: z.record(z.string(), z.number().positive()) }),
  ),
});
export type PriceTable = z.infer<typeof priceTableSchema>;

/** What an instance-hour costs and where the number came from (shown next to estimates). */
export interface InstancePrice {
  instanceType: string;
  usdPerHour: number;
  /** `table (as of DATE, spot ~F of on demand)`, `config fleet.prices`, or `--price / fleet.price_per_hour`. */
  source: string;
}

let cached: PriceTable | undefined;

/** The repository's price table (read once; compiled and source layouts both work). */
export function priceTable(): PriceTable {
  if (cached) return cached;
  const here = dirname(fileURLToPath(import.meta.url));
  for (const up of ['../../..', '../..']) {
    let text: string;
    try {
      text = readFileSync(join(here, up, 'data', 'ec2-prices.json'), 'utf8');
    } catch {
      continue;
    }
    cached = priceTableSchema.parse(JSON.parse(text));
    return cached;
  }
  throw new Error('data/ec2-prices.json is missing from the installation');
}

export interface PriceOptions {
  region: string;
  spot: boolean;
  /** `--price` or `fleet.price_per_hour`: USD per instance-hour, used as is. */
  pricePerHour?: number;
  /** Config `fleet.prices`: USD per instance-hour by type, used as is. */
  prices: Record<string, number>;
}

/**
 * The price of one instance-hour of `instanceType`. An unknown type (or a region the table lacks)
 * is a ConfigError naming the ways out, raised before anything is launched.
 */
export function instancePrice(instanceType: string, o: PriceOptions, table: PriceTable = priceTable()): InstancePrice {
  if (o.pricePerHour !== undefined) return { instanceType, usdPerHour: o.pricePerHour, source: '--price / fleet.price_per_hour' };
  const configured = o.prices[instanceType];
  if (configured !== undefined) return { instanceType, usdPerHour: configured, source: 'config fleet.prices' };
  const row = table.types[instanceType];
  if (!row) {
    throw new ConfigError(
      `no price known for instance type ${instanceType} (the table knows ${Object.keys(table.types).length} types, e.g. c7i.4xlarge, m6i.2xlarge); ` +
        'check the type, or give its on-demand price: --price USD_PER_HOUR, or fleet.prices in ct.config.yml',
    );
  }
  const onDemand = row.usd_per_hour[o.region];
  if (onDemand === undefined) {
    throw new ConfigError(
      `no price known for ${instanceType} in ${o.region} (the table has ${Object.keys(row.usd_per_hour).join(', ')}); ` +
        'give it: --price USD_PER_HOUR, or fleet.prices in ct.config.yml',
    );
  }
  const usdPerHour = o.spot ? round4(onDemand * table.spot_fraction) : onDemand;
  return {
    instanceType,
    usdPerHour,
    source: `price table as of ${table.as_of}${o.spot ? `, spot ~${table.spot_fraction} of on demand $${onDemand}/h` : ', on demand'}`,
  };
}

function round4(x: number): number {
  return Math.round(x * 10_000) / 10_000;
}
