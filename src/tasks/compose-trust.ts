/**
 * Which host powers of a setting's compose files ct.config.yml trusts (`settings.<name>.trust`),
 * and the refusal of the rest. The one home of the rule: `ct envs validate`, the catalog every
 * run loads environments through, and fleet workers (trusting what the controller's manifest
 * says it trusted) all call it.
 */
import { realpathSync } from 'node:fs';
import { isAbsolute, relative, resolve, sep } from 'node:path';
import type { Config } from '../config/config.js';
import { ConfigError } from '../errors.js';
import type { HostPower } from '../sandbox/docker/compose-powers.js';

/** Setting name -> the powers trusted for it. */
export type SettingsTrust = ReadonlyMap<string, readonly string[]>;

/** The trust ct.config.yml (and ct.config.local.yml) gives each setting. */
export function settingsTrust(config: Pick<Config, 'settings'>): SettingsTrust {
  return new Map(Object.entries(config.settings).flatMap(([name, s]) => (s.trust?.length ? [[name, s.trust] as const] : [])));
}

/**
 * Whether `trust` covers `power`. Tokens match exactly, but `bind:PATH` also covers every path
 * under PATH; a relative PATH is taken from the setting's folder (so one trust works wherever the
 * setting is checked out), and a PATH with a `$` matches only that text.
 */
export function isTrusted(power: string, trust: readonly string[], settingDir: string): boolean {
  if (trust.includes(power)) return true;
  if (!power.startsWith('bind:') || power.includes('$')) return false;
  const path = power.slice('bind:'.length);
  return trust.some((t) => {
    if (!t.startsWith('bind:') || t.includes('$')) return false;
    const raw = t.slice('bind:'.length);
    const base = isAbsolute(raw) ? real(raw) : resolve(real(settingDir), raw);
    const rel = relative(base, path);
    return rel === '' || (!rel.startsWith(`..${sep}`) && rel !== '..' && !isAbsolute(rel));
  });
}

/** The powers `trust` leaves untrusted. */
export function untrustedPowers(powers: readonly HostPower[], trust: readonly string[], settingDir: string): HostPower[] {
  return powers.filter((p) => !isTrusted(p.power, trust, settingDir));
}

/** One line naming a refused power: the file (relative to `from`), where in it, the key and the token. */
export function powerText(p: HostPower, from: string): string {
  const file = relative(from, p.file) || p.file;
  return `${file}: ${p.where}.${p.key}: ${p.power} gives the sandbox power over the host`;
}

/** How to trust `powers` for `setting`, as a ct.config.yml snippet. */
export function trustHint(setting: string, powers: readonly HostPower[]): string {
  const tokens = [...new Set(powers.map((p) => p.power))];
  return `if you trust setting ${setting} with this, list it in ct.config.yml: settings: {${setting}: {trust: [${tokens.map(quoteToken).join(', ')}]}} (see docs/security.md)`;
}

/** Refuses an environment whose compose file has powers `trust` leaves out (ConfigError naming each). */
export function checkComposeTrust(env: { id: string; setting: string; dir: string; hostPowers: readonly HostPower[] }, trust: readonly string[], settingDir: string): void {
  const refused = untrustedPowers(env.hostPowers, trust, settingDir);
  if (refused.length === 0) return;
  throw new ConfigError(
    `environment ${env.setting}:${env.id} (${env.dir}) is refused before any sandbox starts:\n${refused.map((p) => `  - ${powerText(p, env.dir)}\n`).join('')}${trustHint(env.setting, refused)}`,
  );
}

/** The powers a selection uses, by setting (all of them trusted, or loading would have failed). */
export function trustedPowers(envs: Iterable<{ setting: string; hostPowers: readonly HostPower[] }>): Record<string, string[]> {
  const out = new Map<string, Set<string>>();
  for (const e of envs) {
    for (const p of e.hostPowers) {
      if (!out.has(e.setting)) out.set(e.setting, new Set());
      out.get(e.setting)!.add(p.power);
    }
  }
  return Object.fromEntries([...out].sort(([a], [b]) => a.localeCompare(b)).map(([s, ps]) => [s, [...ps].sort()]));
}

/** One line per setting: what this run trusted. */
export function trustedLines(trusted: Record<string, string[]>): string[] {
  return Object.entries(trusted).map(([s, ps]) => `trusted: setting ${s} may give its sandboxes ${ps.join(', ')} (settings.${s}.trust in ct.config.yml)`);
}

function quoteToken(t: string): string {
  return /^[A-Za-z0-9_:./-]+$/.test(t) ? t : JSON.stringify(t);
}

function real(p: string): string {
  try {
    return realpathSync(p);
  } catch {
    return resolve(p);
  }
}
