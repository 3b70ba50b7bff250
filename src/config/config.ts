import { existsSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';
import { parse as parseDotenv } from 'dotenv';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { ConfigError } from '../errors.js';

/**
 * ct's settings, compiled in stages: defaults < ct.config.yml < ct.config.local.yml < .env <
 * environment < flags, then validated. Modules receive the finished Config; nothing else reads
 * process.env.
 */
export const configSchema = z.object({
  /** Where settings (environments) live; CT_SETTINGS_DIR. */
  settings_dir: z.string().default('.settings'),
  /** Where logs are written; CT_LOG_DIR. */
  log_dir: z.string().default('logs'),
  /** ct's own state (run ownership records, known hosts); CT_STATE_DIR. */
  state_dir: z.string().default(join(homedir(), '.ct')),
  sandbox: z
    .object({
      /** `auto` prefers `docker compose` (v2), else `docker-compose` (v1); CT_COMPOSE. */
      compose: z.enum(['auto', 'v1', 'v2']).default('auto'),
      /** CIDR for sample networks, or `docker` to let Docker pick; CT_NETWORK_POOL. */
      network_pool: z.string().default('10.213.0.0/16'),
      /** Seconds to start a sample's services and pass their healthchecks. */
      start_timeout: z.number().positive().default(180),
      /** Attempts to start a sandbox when the infrastructure fails. */
      start_attempts: z.number().int().min(1).max(10).default(3),
      /** Run commands through a persistent shell inside each sandbox; CT_EXEC_CHANNEL. */
      exec_channel: z.boolean().default(true),
    })
    .prefault({}),
  eval: z
    .object({
      scorer_timeout: z.number().positive().default(120),
      setup_timeout: z.number().positive().default(600),
      bash_timeout: z.number().positive().default(180),
      tool_output_limit: z.number().int().positive().default(16_000),
    })
    .prefault({}),
});

export type Config = z.infer<typeof configSchema>;

export interface ConfigSources {
  cwd: string;
  env: NodeJS.ProcessEnv;
  /** Dotted keys from flags, e.g. {'log_dir': 'out'}. Highest precedence. */
  overrides?: Record<string, unknown>;
}

/** Environment variables that set config keys. */
const ENV_KEYS: Record<string, [string, (v: string) => unknown]> = {
  CT_SETTINGS_DIR: ['settings_dir', String],
  CT_LOG_DIR: ['log_dir', String],
  CT_STATE_DIR: ['state_dir', String],
  CT_COMPOSE: ['sandbox.compose', String],
  CT_NETWORK_POOL: ['sandbox.network_pool', String],
  CT_EXEC_CHANNEL: ['sandbox.exec_channel', (v) => !/^(0|false|no|off)$/i.test(v)],
};

/** Reads `.env` in cwd (values there apply unless the real environment already sets them). */
export function loadDotenv(cwd: string, env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const file = join(cwd, '.env');
  if (!existsSync(file)) return env;
  return { ...parseDotenv(readFileSync(file)), ...env };
}

export function loadConfig(sources: ConfigSources): Config {
  const layered: Record<string, unknown> = {};
  for (const name of ['ct.config.yml', 'ct.config.local.yml']) {
    const file = join(sources.cwd, name);
    if (!existsSync(file)) continue;
    let doc: unknown;
    try {
      doc = parseYaml(readFileSync(file, 'utf8'));
    } catch (e) {
      throw new ConfigError(`${file}: not valid YAML: ${(e as Error).message}`);
    }
    if (doc && typeof doc === 'object') deepMerge(layered, doc as Record<string, unknown>);
  }
  const env = loadDotenv(sources.cwd, sources.env);
  for (const [name, [key, conv]] of Object.entries(ENV_KEYS)) {
    const v = env[name];
    if (v !== undefined && v !== '') setPath(layered, key, conv(v));
  }
  for (const [k, v] of Object.entries(sources.overrides ?? {})) if (v !== undefined) setPath(layered, k, v);
  // Keys only other commands know (settings registry, cloud names) are kept out of this schema.
  const known = configSchema.keyof().options as string[];
  const input = Object.fromEntries(Object.entries(layered).filter(([k]) => known.includes(k)));
  const r = configSchema.safeParse(input);
  if (!r.success) {
    throw new ConfigError(`invalid configuration: ${r.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
  }
  const c = r.data;
  c.settings_dir = resolve(sources.cwd, c.settings_dir);
  c.log_dir = resolve(sources.cwd, c.log_dir);
  c.state_dir = resolve(sources.cwd, c.state_dir);
  return c;
}

function deepMerge(into: Record<string, unknown>, from: Record<string, unknown>): void {
  for (const [k, v] of Object.entries(from)) {
    const cur = into[k];
    if (v && typeof v === 'object' && !Array.isArray(v) && cur && typeof cur === 'object' && !Array.isArray(cur)) {
      deepMerge(cur as Record<string, unknown>, v as Record<string, unknown>);
    } else into[k] = v;
  }
}

function setPath(obj: Record<string, unknown>, path: string, value: unknown): void {
  const parts = path.split('.');
  let cur = obj;
  for (const p of parts.slice(0, -1)) {
    if (!cur[p] || typeof cur[p] !== 'object') cur[p] = {};
    cur = cur[p] as Record<string, unknown>;
  }
  cur[parts.at(-1)!] = value;
}
