/**
 * How many samples a fleet worker runs at once, and how that changes while it runs. A worker
 * starts from what the fleet asked for (the manifest's samples_per_worker), cut to what its
 * machine holds (its CPUs and available memory at each sample's needs), and then adapts:
 *
 *   +1 slot     a sample finished cleanly while every slot was busy, memory stays above
 *               MEMORY_RESERVE after one more sample's need, and the CPUs are not saturated
 *   halved      a sandbox would not start, or a container was killed for memory (exit 137,
 *               Docker's OOMKilled)
 *   -1/4        memory pressure: available memory below MEMORY_RESERVE / 2, or the kernel's
 *               memory pressure (PSI `some avg10`) above PSI_SHRINK_PERCENT
 *
 * always within [1, fleet.max_concurrency]. After a decrease nothing changes for COOLDOWN_MS (a
 * burst of failures from one cause halves once, and growth waits for the machine to settle). A
 * worker given `--concurrency N` runs exactly N (`fixed`). The machine is read through injected
 * probes, so the rule is tested without Docker.
 */
import { loadavg } from 'node:os';
import { availableCpus, availableMemory, readSmallFile } from '../eval/capacity.js';

/** What one sample's sandbox needs of the machine. */
export interface SampleNeeds {
  memoryBytes: number;
  cpus: number;
}

/**
 * A sample's needs when its environment declares none: 1 GiB and half a CPU (samples mostly wait
 * on the model or on commands; the local runner's default of two samples per CPU, 1 GiB each).
 */
export const DEFAULT_SAMPLE_NEEDS: SampleNeeds = { memoryBytes: 1024 ** 3, cpus: 0.5 };

/** Memory kept free: no slot is added unless this much stays available after one more sample (2 GiB). */
export const MEMORY_RESERVE = 2 * 1024 ** 3;
/** Kernel memory pressure (percent of the last 10 s some task stalled on memory) above which slots are taken away. */
export const PSI_SHRINK_PERCENT = 10;
/** ...and above which none is added. */
export const PSI_GROW_PERCENT = 1;
/** Load per CPU (1-minute average) at or above which no slot is added. */
export const CPU_BUSY_LOAD = 1.5;
/** After a decrease, no change for this long (60 s). */
export const COOLDOWN_MS = 60_000;

/** The machine as the rule sees it; every reader may answer undefined where the system does not say. */
export interface MachineProbes {
  /** Bytes available for new work: MemAvailable, or less under a cgroup limit. */
  memAvailable(): number | undefined;
  /** The kernel's memory pressure, `some avg10` of /proc/pressure/memory (percent), where present. */
  memoryPressure(): number | undefined;
  /** 1-minute load average per CPU. */
  cpuLoad(): number | undefined;
  cpus(): number;
  /** Milliseconds (Date.now in production). */
  now(): number;
}

/** Why a worker's concurrency changed (events.jsonl `concurrency` events carry it). */
export type ConcurrencyReason = 'clean_finish' | 'sandbox_start_failed' | 'oom_killed' | 'memory_pressure';

export interface ConcurrencyChange {
  from: number;
  to: number;
  reason: ConcurrencyReason;
  /** One line for the worker's log and the controller's progress (what was measured). */
  detail: string;
}

/** How a sample ended, as far as the rule cares. */
export type SampleVerdict = 'clean' | 'failed' | 'sandbox_start_failed' | 'oom_killed';

export interface AdaptiveConcurrencyOptions {
  /** What the fleet asked for (manifest samples_per_worker, or `--concurrency`). */
  requested: number;
  /** fleet.max_concurrency. */
  ceiling: number;
  /** `--concurrency N` on the worker: run exactly `requested`, never adapt. */
  fixed: boolean;
  /** The largest need among the fleet's environments (DEFAULT_SAMPLE_NEEDS when none declares one). */
  needs: SampleNeeds;
  probes: MachineProbes;
}

/** The concurrency a worker starts with: what was asked, cut to the machine and the ceiling, at least 1. */
export function startingConcurrency(o: Omit<AdaptiveConcurrencyOptions, 'fixed'> & { fixed?: boolean }): { value: number; detail: string } {
  if (o.fixed) return { value: o.requested, detail: `${o.requested} (--concurrency: fixed)` };
  const cpus = o.probes.cpus();
  const mem = o.probes.memAvailable();
  const byCpu = Math.floor(cpus / o.needs.cpus);
  const byMem = mem === undefined ? Infinity : Math.floor(mem / o.needs.memoryBytes);
  const value = Math.max(1, Math.min(o.requested, o.ceiling, byCpu, byMem));
  const limits = [`asked ${o.requested}`, `ceiling ${o.ceiling}`, `${cpus} CPU(s) hold ${byCpu}`, ...(mem === undefined ? [] : [`${gib(mem)} available holds ${byMem}`])];
  return { value, detail: `${value} (${limits.join(', ')}; ${gib(o.needs.memoryBytes)} and ${o.needs.cpus} CPU a sample)` };
}

/** The rule: feed it each finished sample and a periodic check; it answers with a change, or undefined. */
export class AdaptiveConcurrency {
  private value: number;
  private readonly startDetail: string;
  private lastDecrease = -Infinity;

  constructor(private readonly o: AdaptiveConcurrencyOptions) {
    const s = startingConcurrency(o);
    this.value = s.value;
    this.startDetail = s.detail;
  }

  /** Samples at once now. */
  get current(): number {
    return this.value;
  }

  /** How the starting value was decided, for the worker's log. */
  get started(): string {
    return this.startDetail;
  }

  /** A sample ended; `saturated`: every slot was busy when it did (only then is another slot of use). */
  sampleEnded(verdict: SampleVerdict, saturated: boolean): ConcurrencyChange | undefined {
    if (this.o.fixed) return undefined;
    if (verdict === 'sandbox_start_failed' || verdict === 'oom_killed') {
      if (this.coolingDown()) return undefined;
      const what = verdict === 'oom_killed' ? 'a container was killed for memory' : 'a sandbox would not start';
      return this.set(Math.floor(this.value / 2), verdict, what);
    }
    if (verdict !== 'clean' || !saturated || this.value >= this.o.ceiling || this.coolingDown()) return undefined;
    const blocked = this.growthBlocked();
    if (blocked) return undefined;
    return this.set(this.value + 1, 'clean_finish', `a sample finished cleanly with every slot busy; ${this.machineLine()}`);
  }

  /** The periodic look at the machine: fewer slots under memory pressure. */
  check(): ConcurrencyChange | undefined {
    if (this.o.fixed || this.value <= 1 || this.coolingDown()) return undefined;
    const mem = this.o.probes.memAvailable();
    const psi = this.o.probes.memoryPressure();
    const low = mem !== undefined && mem < MEMORY_RESERVE / 2;
    const stalled = psi !== undefined && psi > PSI_SHRINK_PERCENT;
    if (!low && !stalled) return undefined;
    return this.set(this.value - Math.max(1, Math.ceil(this.value / 4)), 'memory_pressure', `memory pressure: ${this.machineLine()}`);
  }

  /** Why no slot may be added now, or undefined. */
  private growthBlocked(): string | undefined {
    const mem = this.o.probes.memAvailable();
    if (mem !== undefined && mem - this.o.needs.memoryBytes < MEMORY_RESERVE) return 'memory';
    const psi = this.o.probes.memoryPressure();
    if (psi !== undefined && psi > PSI_GROW_PERCENT) return 'memory pressure';
    const load = this.o.probes.cpuLoad();
    if (load !== undefined && load >= CPU_BUSY_LOAD) return 'cpu';
    return undefined;
  }

  private coolingDown(): boolean {
    return this.o.probes.now() - this.lastDecrease < COOLDOWN_MS;
  }

  private set(to: number, reason: ConcurrencyReason, detail: string): ConcurrencyChange | undefined {
    const next = Math.max(1, Math.min(this.o.ceiling, to));
    if (next === this.value) return undefined;
    const from = this.value;
    this.value = next;
    if (next < from) this.lastDecrease = this.o.probes.now();
    return { from, to: next, reason, detail };
  }

  private machineLine(): string {
    const mem = this.o.probes.memAvailable();
    const psi = this.o.probes.memoryPressure();
    const load = this.o.probes.cpuLoad();
    return [mem !== undefined ? `${gib(mem)} available` : undefined, psi !== undefined ? `memory pressure ${psi}%` : undefined, load !== undefined ? `load ${load.toFixed(2)} per CPU` : undefined]
      .filter(Boolean)
      .join(', ');
  }
}

/**
 * How a finished sample counts: a no-result attempt that never got past starting its sandbox is
 * a start failure; an error naming exit 137 or Docker's OOMKilled is a memory kill.
 */
export function sampleVerdict(o: { end: 'ok' | 'sample-error' | 'no-result' | 'cancelled'; reason?: string; phase?: string }): SampleVerdict {
  if (o.reason !== undefined && /OOMKilled|out of memory|\bexit(ed)?( with)?( code| status)? 137\b|\bcode 137\b/i.test(o.reason)) return 'oom_killed';
  if (o.end === 'ok') return 'clean';
  if (o.end === 'no-result' && o.phase === 'starting') return 'sandbox_start_failed';
  return 'failed';
}

/** This machine, read from /proc and the cgroup files (Linux); elsewhere the memory readers answer undefined. */
export function systemProbes(): MachineProbes {
  const cpus = availableCpus();
  return {
    memAvailable: availableMemory,
    memoryPressure: () => {
      const psi = readSmallFile('/proc/pressure/memory');
      const m = psi ? /^some avg10=([\d.]+)/m.exec(psi) : null;
      return m ? Number(m[1]) : undefined;
    },
    cpuLoad: () => {
      const l = loadavg()[0]!;
      // Windows answers zeros: no load known.
      return l > 0 ? l / cpus : undefined;
    },
    cpus: () => cpus,
    now: () => Date.now(),
  };
}

function gib(bytes: number): string {
  return `${(bytes / 1024 ** 3).toFixed(1)} GiB`;
}
