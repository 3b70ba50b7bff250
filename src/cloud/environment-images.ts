/**
 * The Docker images the configured settings' environments declare: each compose service's
 * `image:` (services with a `build:` section are built per run from the code, not pulled).
 * What `ct cloud build-ami` bakes into the worker AMI.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { ConfigError } from '../errors.js';
import { SettingsCatalog } from '../tasks/environment-loader.js';

/** Image references, sorted and without duplicates; a settings folder without environments gives none. */
export function environmentImages(settingsDir: string): string[] {
  // Only folders are listed here; nothing is loaded or run, so no trust is needed.
  const catalog = new SettingsCatalog(settingsDir, new Map());
  const images = new Set<string>();
  for (const [setting, env] of catalog.listEnvironments()) {
    const dir = join(catalog.root, setting, env, 'codebase');
    const file = ['compose.yml', 'compose.yaml', 'docker-compose.yml'].map((f) => join(dir, f)).find((f) => {
      try {
        readFileSync(f);
        return true;
      } catch {
        return false;
      }
    });
    if (!file) continue;
    let doc: { services?: Record<string, { image?: unknown; build?: unknown } | null> };
    try {
      doc = parse(readFileSync(file, 'utf8')) ?? {};
    } catch (e) {
      throw new ConfigError(`cannot read compose file ${file}: ${(e as Error).message}`);
    }
    for (const svc of Object.values(doc.services ?? {})) {
      if (svc && typeof svc.image === 'string' && !svc.build && !svc.image.includes('$')) images.add(svc.image);
    }
  }
  return [...images].sort();
}
