import type { z } from 'zod';

/**
 * One zod issue in words a user acts on: a missing field says "missing", a value of the wrong
 * kind says "wrong type" with what was expected and what was found, an enum lists its values.
 * The issue must come from a parse with `reportInput: true` (else every bad value looks missing).
 */
export function issueText(issue: z.core.$ZodIssue): string {
  const input = (issue as { input?: unknown }).input;
  if (issue.code === 'invalid_type') {
    if (input === undefined) return 'missing';
    return `wrong type (expected ${issue.expected}, got ${describe(input)})`;
  }
  if (issue.code === 'invalid_value') {
    return `must be one of ${issue.values.map((v) => JSON.stringify(v)).join(', ')} (got ${describe(input)})`;
  }
  if (issue.code === 'unrecognized_keys') return `unknown key(s) ${issue.keys.join(', ')}`;
  return input === undefined ? issue.message : `${issue.message} (got ${describe(input)})`;
}

function describe(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'a list';
  if (typeof v === 'object') return 'a mapping';
  if (typeof v === 'string') return `${JSON.stringify(v.length > 60 ? `${v.slice(0, 57)}...` : v)} (a string)`;
  return `${String(v)} (a ${typeof v})`;
}
