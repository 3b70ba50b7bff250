/**
 * Caps on every zip ct reads (logs, trajectories, fleet results), so a small archive that
 * expands to gigabytes (a zip bomb) or lists millions of members is refused with bounded memory
 * instead of exhausting it. The defaults live here and in the config schema (`archive.*`), which
 * refers to them; the compiled config sets the caps every reader in the process uses.
 */

export interface ArchiveLimits {
  /** Member records in the central directory. */
  maxEntries: number;
  /** Uncompressed bytes of one member. */
  maxEntryBytes: number;
  /** Uncompressed bytes of all members together. */
  maxTotalBytes: number;
}

export const DEFAULT_ARCHIVE_LIMITS: Readonly<ArchiveLimits> = {
  // A merged log holds one member per sample plus a few: 100,000 is far past any run's size.
  maxEntries: 100_000,
  // V8's longest string is just under 512 Mi characters: a larger member could not be parsed as
  // JSON anyway, so reading it could only exhaust memory.
  maxEntryBytes: 512 * 1024 * 1024,
  // A merged log of thousands of samples of a few MB each stays well under this.
  maxTotalBytes: 16 * 1024 * 1024 * 1024,
};

let current: ArchiveLimits = { ...DEFAULT_ARCHIVE_LIMITS };

/** The caps readers use when they are given none (the compiled config's). */
export function archiveLimits(): ArchiveLimits {
  return current;
}

/** Sets the caps for every reader opened from now on (called as the config is compiled). */
export function setArchiveLimits(limits: ArchiveLimits): void {
  current = { ...limits };
}

/** A byte count for messages: `512 MiB`, `3.0 GiB`, `1200 bytes`. */
export function formatBytes(n: number): string {
  const units: Array<[number, string]> = [
    [1024 ** 3, 'GiB'],
    [1024 ** 2, 'MiB'],
    [1024, 'KiB'],
  ];
  for (const [size, unit] of units) {
    if (n >= size) return `${Number.isInteger(n / size) ? n / size : (n / size).toFixed(1)} ${unit}`;
  }
  return `${n} bytes`;
}
