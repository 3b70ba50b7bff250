import { readFileSync } from 'node:fs';
import { availableParallelism, freemem, totalmem } from 'node:os';

/** Memory a typical sample's services need; the default concurrency leaves room for this each. */
const MEMORY_PER_SAMPLE = 1024 ** 3;

/**
 * Default `--max-samples`: two samples per available CPU (samples mostly wait on the model or
 * on commands), limited by memory at 1 GiB a sample. CPUs and memory are read from the cgroup
 * limits the process actually runs under (containers, CI runners), not just the machine's totals.
 */
export function defaultMaxSamples(): number {
  const cpus = availableCpus();
  const mem = Math.min(freemem(), cgroupMemory() ?? totalmem());
  return Math.max(1, Math.min(Math.floor(cpus * 2), Math.floor(mem / MEMORY_PER_SAMPLE)));
}

/** CPUs this process may use: the machine's, or fewer under a cgroup CPU limit. */
export function availableCpus(): number {
  return Math.min(availableParallelism(), cgroupCpus() ?? Infinity);
}

/**
 * Memory free for new samples now, in bytes: the kernel's MemAvailable, or less when this
 * process's cgroup (v2) has less left under its limit; undefined where neither can be read.
 */
export function availableMemory(): number | undefined {
  const meminfo = readSmallFile('/proc/meminfo');
  const m = meminfo ? /^MemAvailable:\s+(\d+) kB/m.exec(meminfo) : null;
  const host = m ? Number(m[1]) * 1024 : undefined;
  const max = readSmallFile('/sys/fs/cgroup/memory.max');
  const used = Number(readSmallFile('/sys/fs/cgroup/memory.current'));
  const cgroup = max && max !== 'max' && used > 0 ? Number(max) - used : undefined;
  if (host === undefined) return cgroup;
  return cgroup === undefined ? host : Math.min(host, cgroup);
}

/** A small file's text (/proc, cgroup files), trimmed; undefined when it cannot be read. */
export function readSmallFile(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8').trim();
  } catch {
    return undefined;
  }
}

function cgroupCpus(): number | undefined {
  const v2 = readSmallFile('/sys/fs/cgroup/cpu.max');
  if (v2) {
    const [quota, period] = v2.split(/\s+/);
    if (quota && quota !== 'max') return Math.max(1, Number(quota) / Number(period));
    return undefined;
  }
  const quota = Number(readSmallFile('/sys/fs/cgroup/cpu/cpu.cfs_quota_us'));
  const period = Number(readSmallFile('/sys/fs/cgroup/cpu/cpu.cfs_period_us'));
  return quota > 0 && period > 0 ? Math.max(1, quota / period) : undefined;
}

function cgroupMemory(): number | undefined {
  const v2 = readSmallFile('/sys/fs/cgroup/memory.max');
  if (v2 && v2 !== 'max') return Number(v2);
  const v1 = Number(readSmallFile('/sys/fs/cgroup/memory/memory.limit_in_bytes'));
  // cgroup v1 reports a huge number when there is no limit.
  return v1 > 0 && v1 < 2 ** 60 ? v1 : undefined;
}
