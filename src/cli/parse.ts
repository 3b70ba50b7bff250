import { InvalidArgumentError } from 'commander';

/** Commander option parsers: each turns bad input into a usage error (exit 2). */
export function collect(value: string, previous: string[] = []): string[] {
  return [...previous, value];
}

/** Decimal digits only: `Number()` would also take `0x2`, `1e0`, `0b1`, ` 2` and `2.0`. */
export function positiveInt(value: string): number {
  const n = /^[0-9]+$/.test(value) ? Number(value) : NaN;
  if (!Number.isSafeInteger(n) || n < 1) throw new InvalidArgumentError('must be a whole number of at least 1, in decimal digits');
  return n;
}

export function positiveNumber(value: string): number {
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0) throw new InvalidArgumentError('must be a number above 0');
  return n;
}

/** `-p key=value`, repeatable, into a record. */
export function keyValue(value: string, previous: Record<string, string> = {}): Record<string, string> {
  const i = value.indexOf('=');
  if (i <= 0) throw new InvalidArgumentError(`"${value}" is not key=value`);
  return { ...previous, [value.slice(0, i).trim()]: value.slice(i + 1) };
}
