import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** ct's version, from its package.json. */
export function ctVersion(): string {
  const here = dirname(fileURLToPath(import.meta.url));
  for (const up of ['../../..', '../..']) {
    try {
      return (JSON.parse(readFileSync(join(here, up, 'package.json'), 'utf8')) as { version: string }).version;
    } catch {
      // Try the next layout (compiled vs source).
    }
  }
  return '0.0.0';
}
