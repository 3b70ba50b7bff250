/**
 * What one sample of an environment needs of its machine, as its compose file's resource limits
 * say: the sum over services of `mem_limit` / `deploy.resources.limits.memory` (else the
 * reservation) and of `cpus` / `deploy.resources.limits.cpus`. The environment format declares no
 * needs of its own, so these limits are the only statement of them; a file that sets none says
 * nothing (undefined), and the caller keeps its default.
 */
import { readFileSync } from 'node:fs';
import { parse } from 'yaml';

export interface ComposeNeeds {
  /** Bytes, when some service states a memory limit or reservation. */
  memoryBytes?: number;
  /** CPUs, when some service states them. */
  cpus?: number;
}

const UNITS: Record<string, number> = { b: 1, k: 1024, kb: 1024, m: 1024 ** 2, mb: 1024 ** 2, g: 1024 ** 3, gb: 1024 ** 3, t: 1024 ** 4, tb: 1024 ** 4 };

/** A compose byte value (`512m`, `2g`, `1.5GB`, 1073741824), or undefined when it is none. */
export function composeBytes(v: unknown): number | undefined {
  if (typeof v === 'number' && v > 0) return v;
  if (typeof v !== 'string') return undefined;
  const m = /^\s*(\d+(?:\.\d+)?)\s*([kmgt]?b?)\s*$/i.exec(v);
  if (!m) return undefined;
  const n = Number(m[1]) * (UNITS[(m[2] || 'b').toLowerCase()] ?? NaN);
  return Number.isFinite(n) && n > 0 ? n : undefined;
}

function composeCpus(v: unknown): number | undefined {
  const n = typeof v === 'number' ? v : typeof v === 'string' ? Number(v) : NaN;
  return Number.isFinite(n) && n > 0 ? n : undefined;
}

/** The needs a compose file states (see above); an unreadable file states none. */
export function composeNeeds(composeFile: string): ComposeNeeds {
  let doc: unknown;
  try {
    doc = parse(readFileSync(composeFile, 'utf8'));
  } catch {
    return {};
  }
  const services = (doc as { services?: Record<string, unknown> } | null)?.services;
  if (!services || typeof services !== 'object') return {};
  let memory = 0;
  let cpus = 0;
  for (const s of Object.values(services)) {
    if (!s || typeof s !== 'object') continue;
    const svc = s as Record<string, unknown>;
    const res = (svc.deploy as { resources?: { limits?: Record<string, unknown>; reservations?: Record<string, unknown> } } | undefined)?.resources;
    memory += composeBytes(svc.mem_limit) ?? composeBytes(res?.limits?.memory) ?? composeBytes(svc.mem_reservation) ?? composeBytes(res?.reservations?.memory) ?? 0;
    cpus += composeCpus(svc.cpus) ?? composeCpus(res?.limits?.cpus) ?? composeCpus(res?.reservations?.cpus) ?? 0;
  }
  return { ...(memory > 0 ? { memoryBytes: memory } : {}), ...(cpus > 0 ? { cpus } : {}) };
}
