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

function read(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8').trim();
  } catch {
    return undefined;
  }
}

function cgroupCpus(): number | undefined {
  const v2 = read('/sys/fs/cgroup/cpu.max');
  if (v2) {
    const [quota, period] = v2.split(/\s+/);
    if (quota && quota !== 'max') return Math.max(1, Number(quota) / Number(period));
    return undefined;
  }
  const quota = Number(read('/sys/fs/cgroup/cpu/cpu.cfs_quota_us'));
  const period = Number(read('/sys/fs/cgroup/cpu/cpu.cfs_period_us'));
  return quota > 0 && period > 0 ? Math.max(1, quota / period) : undefined;
}

function cgroupMemory(): number | undefined {
  const v2 = read('/sys/fs/cgroup/memory.max');
  if (v2 && v2 !== 'max') return Number(v2);
  const v1 = Number(read('/sys/fs/cgroup/memory/memory.limit_in_bytes'));
  // cgroup v1 reports a huge number when there is no limit.
  return v1 > 0 && v1 < 2 ** 60 ? v1 : undefined;
}
