import { readFileSync } from 'node:fs';
import { parse } from 'yaml';
import { ConfigError } from '../../errors.js';

/** What ct needs to know of a compose file before starting it. */
export interface ComposeFileInfo {
  services: string[];
  /** Services that have a `build:` section (built once per run). */
  buildServices: string[];
  /** Networks compose will create: `default` (when a service uses it) and declared, non-external ones without their own IPAM config. */
  managedNetworks: string[];
  /** The agent's service: `default`, or (where allowed) the one marked `x-default: true`. */
  defaultService: string;
}

/**
 * Reads a compose file; a missing `default` service is a ConfigError. With `xDefault` (Inspect's
 * rule), a file without one may mark its agent's service `x-default: true` instead.
 */
export function readComposeFile(path: string, options: { xDefault?: boolean } = {}): ComposeFileInfo {
  let doc: unknown;
  try {
    doc = parse(readFileSync(path, 'utf8'), { merge: true });
  } catch (e) {
    throw new ConfigError(`cannot read compose file ${path}: ${(e as Error).message}`);
  }
  if (!doc || typeof doc !== 'object' || !('services' in doc) || typeof doc.services !== 'object' || !doc.services) {
    throw new ConfigError(`compose file ${path} has no services`);
  }
  const services = doc.services as Record<string, Record<string, unknown> | null>;
  const names = Object.keys(services);
  const marked = names.filter((n) => services[n]?.['x-default'] === true);
  const defaultService = names.includes('default') ? 'default' : options.xDefault && marked.length === 1 ? marked[0]! : undefined;
  if (!defaultService) {
    if (options.xDefault) {
      throw new ConfigError(
        `compose file ${path} has no service named "default" and ${marked.length === 0 ? 'none' : 'more than one'} marked x-default: true (found: ${names.join(', ')}); name the agent's service default or mark it x-default: true`,
      );
    }
    throw new ConfigError(
      `compose file ${path} has no service named "default" (found: ${names.join(', ')}); the agent runs in the service named default`,
    );
  }
  const buildServices = names.filter((n) => services[n] && 'build' in services[n]!);
  const declared = ((doc as { networks?: Record<string, Record<string, unknown> | null> }).networks ?? {}) as Record<
    string,
    Record<string, unknown> | null
  >;
  const managed = new Set<string>();
  for (const n of names) {
    const svc = services[n] ?? {};
    if (typeof svc.network_mode === 'string') continue;
    const nets = svc.networks;
    if (!nets) managed.add('default');
    else for (const k of Array.isArray(nets) ? nets : Object.keys(nets)) managed.add(String(k));
  }
  const managedNetworks = [...managed].filter((n) => {
    const d = declared[n];
    return !(d && (d.external || d.ipam));
  });
  return { services: names, buildServices, managedNetworks, defaultService };
}
