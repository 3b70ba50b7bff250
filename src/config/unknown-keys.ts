import { z } from 'zod';
import { nearestName } from './nearest-name.js';

export interface UnknownKey {
  /** Dotted path of the key as written, e.g. `eval.scorer_timout`. */
  path: string;
  /** The nearest valid dotted key, when one is close enough to be the intended one. */
  suggestion?: string;
}

/**
 * Keys of a parsed config document that the schema does not know. Free-form maps (records such as
 * `settings` or `models.aliases`) accept any key but their values are still checked. The
 * suggestion is the nearest sibling key; failing that, the nearest key anywhere (so a key written
 * at the wrong level, like a top-level `scorer_timeout`, points to `eval.scorer_timeout`).
 */
export function findUnknownKeys(doc: unknown, schema: z.ZodType): UnknownKey[] {
  const all = knownPaths(schema, '');
  const out: UnknownKey[] = [];
  walk(doc, schema, [], all, out);
  return out;
}

function walk(doc: unknown, schema: z.ZodType, path: string[], all: string[], out: UnknownKey[]): void {
  if (!doc || typeof doc !== 'object' || Array.isArray(doc)) return;
  const s = unwrap(schema);
  if (s instanceof z.ZodRecord) {
    for (const [k, v] of Object.entries(doc)) walk(v, s._zod.def.valueType as z.ZodType, [...path, k], all, out);
    return;
  }
  if (!(s instanceof z.ZodObject)) return;
  const shape = s.shape as Record<string, z.ZodType>;
  for (const [k, v] of Object.entries(doc)) {
    if (k in shape) {
      walk(v, shape[k]!, [...path, k], all, out);
      continue;
    }
    const prefix = path.length ? `${path.join('.')}.` : '';
    const sibling = nearestName(k, Object.keys(shape));
    const anywhere = sibling ? undefined : nearestName(k, all.map((p) => p.split('.').pop()!));
    const suggestion = sibling ? prefix + sibling : anywhere ? all.find((p) => p.split('.').pop() === anywhere) : undefined;
    out.push({ path: prefix + k, ...(suggestion ? { suggestion } : {}) });
  }
}

/** Every dotted key the schema defines (records stop the descent: their keys are the user's). */
function knownPaths(schema: z.ZodType, prefix: string): string[] {
  const s = unwrap(schema);
  if (!(s instanceof z.ZodObject)) return [];
  return Object.entries(s.shape as Record<string, z.ZodType>).flatMap(([k, v]) => [prefix + k, ...knownPaths(v, `${prefix}${k}.`)]);
}

function unwrap(schema: z.ZodType): z.ZodType {
  let s = schema;
  for (let def = s._zod.def as { innerType?: z.ZodType }; def.innerType; def = s._zod.def as { innerType?: z.ZodType }) s = def.innerType;
  return s;
}
