/**
 * The monitor's disk cache: one JSON file per model reply, at `<dir>/<hh>/<sha256>.json`, keyed
 * by everything that decides the reply — the monitor's name, its prompt template, the model name,
 * the filled-in prompt, the generation config and the draw index (an ensemble member). The base
 * URL is not part of the key: the same model behind another proxy gives the same answer.
 *
 * Writers never corrupt it: an entry is written to a temporary name in its folder and renamed
 * into place (atomic on one file system), so concurrent passes, or a pass killed mid-write,
 * leave either a whole entry or none. An entry that does not parse reads as a miss and is
 * overwritten. Only successful replies are stored; a failed call is asked again next time.
 */
import { createHash, randomBytes } from 'node:crypto';
import { mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { GenerateConfig, ModelUsage } from '../log/types.js';

/** Bumped when the key or the entry's shape changes (old entries are then misses). */
export const CACHE_FORMAT = 1;

/** What a cached reply is keyed by. */
export interface MonitorCacheKey {
  monitor: string;
  template: string;
  /** `provider/model`. */
  model: string;
  prompt: string;
  config: GenerateConfig;
  draw: number;
}

export interface CachedReply {
  text: string;
  usage?: ModelUsage;
}

interface CacheEntry extends CachedReply {
  format: number;
  monitor: string;
  model: string;
  draw: number;
  /** ISO 8601. */
  created: string;
}

export class MonitorCache {
  constructor(readonly dir: string) {}

  /** The entry's hash: sha256 over the key's fields as canonical JSON (sorted object keys). */
  static hash(key: MonitorCacheKey): string {
    return createHash('sha256').update(canonicalJson({ format: CACHE_FORMAT, ...key })).digest('hex');
  }

  pathOf(hash: string): string {
    return join(this.dir, hash.slice(0, 2), `${hash}.json`);
  }

  /** The stored reply, or undefined (absent, unreadable, or of another format). */
  async get(key: MonitorCacheKey): Promise<CachedReply | undefined> {
    let text: string;
    try {
      text = await readFile(this.pathOf(MonitorCache.hash(key)), 'utf8');
    } catch {
      return undefined;
    }
    try {
      const entry = JSON.parse(text) as CacheEntry;
      if (entry.format !== CACHE_FORMAT || typeof entry.text !== 'string') return undefined;
      return { text: entry.text, ...(entry.usage ? { usage: entry.usage } : {}) };
    } catch {
      return undefined;
    }
  }

  /** Stores a reply (temp file + rename: readers see the whole entry or none). */
  async put(key: MonitorCacheKey, reply: CachedReply): Promise<void> {
    const path = this.pathOf(MonitorCache.hash(key));
    const entry: CacheEntry = {
      format: CACHE_FORMAT,
      monitor: key.monitor,
      model: key.model,
      draw: key.draw,
      created: new Date().toISOString(),
      text: reply.text,
      ...(reply.usage ? { usage: reply.usage } : {}),
    };
    await mkdir(join(path, '..'), { recursive: true });
    const temp = `${path}.${process.pid}-${randomBytes(4).toString('hex')}.tmp`;
    try {
      await writeFile(temp, JSON.stringify(entry));
      await rename(temp, path);
    } catch (e) {
      await rm(temp, { force: true });
      throw e;
    }
  }
}

/** JSON with object keys sorted at every level, so equal values hash alike whatever their key order. */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(value, (_k, v: unknown) =>
    v && typeof v === 'object' && !Array.isArray(v) ? Object.fromEntries(Object.entries(v as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) : v,
  );
}
