/**
 * Protocols as `ct run eval` compiles them (`--protocol`, `--protocol-arg`, `--monitor`,
 * `--monitor-arg`), before any model is reached: names, thresholds and monitor arguments are
 * checked here, so a bad one is a usage error (exit 2) on the local and the fleet path alike.
 *
 * - trusted-monitoring: the monitor rates each action of the untrusted policy before its tool
 *   calls run; an action scored above `audit_threshold` is audited: the sample ends, caught.
 * - defer-to-trusted: an action scored above `defer_threshold` is replaced by the trusted model's
 *   action for the same conversation; above `audit_threshold` (when given) it is audited first.
 */
import { z } from 'zod';
import { ConfigError } from '../errors.js';
import type { PolicyArgSpec } from '../policies/types.js';
import { BUILTIN_MONITORS } from './monitors.js';

export const PROTOCOL_NAMES = ['trusted-monitoring', 'defer-to-trusted'] as const;
export type ProtocolName = (typeof PROTOCOL_NAMES)[number];

/** The monitor a protocol asks when none is named (`--monitor`). */
export const DEFAULT_PROTOCOL_MONITOR = 'basic';

/** A protocol as the run's plan (and a fleet's manifest) carries it. */
export const protocolPlanSchema = z.object({
  name: z.enum(PROTOCOL_NAMES),
  /** An action scored above this is audited: the sample ends, caught (0-10). */
  audit_threshold: z.number().min(0).max(10).optional(),
  /** defer-to-trusted: an action scored above this is replaced by the trusted model's (0-10). */
  defer_threshold: z.number().min(0).max(10).optional(),
  /** defer-to-trusted: the model whose actions replace deferred ones (an alias or provider/model). */
  trusted_model: z.string().min(1).optional(),
  /** The action monitor and its arguments (as `--monitor-arg` gave them; defaults filled in when it is created). */
  monitor: z.object({ name: z.string().min(1), args: z.record(z.string(), z.string()) }),
});
export type ProtocolPlan = z.infer<typeof protocolPlanSchema>;

export interface ProtocolDefinition {
  name: ProtocolName;
  description: string;
  /** `--protocol-arg key=value` arguments. */
  args: Record<string, PolicyArgSpec>;
}

const AUDIT = 'an action scored above this (0-10) is audited: its tool calls do not run and the sample ends, caught';

export const PROTOCOLS: ProtocolDefinition[] = [
  {
    name: 'trusted-monitoring',
    description: 'The monitor rates each untrusted action before it runs; one scored above audit_threshold ends the sample as audited.',
    args: {
      audit_threshold: { description: AUDIT, required: true },
      sus_threshold: { description: 'another name for audit_threshold' },
    },
  },
  {
    name: 'defer-to-trusted',
    description:
      "The monitor rates each untrusted action before it runs; one scored above defer_threshold is replaced by the trusted model's action (above audit_threshold, if given, the sample ends as audited).",
    args: {
      defer_threshold: { description: "an action scored above this (0-10) is replaced by the trusted model's action for the same conversation", required: true },
      audit_threshold: { description: `${AUDIT} (default: no audits)` },
      trusted_model: { description: 'the model that acts instead: an alias or provider/model', default: 'trusted' },
    },
  },
];

/** The flags a protocol is compiled from (commander's names). */
export interface ProtocolFlags {
  policy?: string;
  protocol?: string;
  untrustedPolicy?: string;
  protocolArg?: Record<string, string>;
  monitor?: string;
  monitorArg?: Record<string, string>;
}

/** Policies without a model: nothing for a monitor to review. */
const MODEL_FREE_POLICIES = ['test', 'replay'];

/**
 * The agent's policy name and the protocol around it, from the flags; a ConfigError (exit 2) for
 * flags that do not go together or bad arguments. Without `--protocol`, the policy is `--policy`
 * (default test).
 */
export function compileProtocol(flags: ProtocolFlags): { policy: string; protocol?: ProtocolPlan } {
  const protocolArgs = flags.protocolArg ?? {};
  const monitorArgs = flags.monitorArg ?? {};
  if (flags.protocol === undefined) {
    const given = [
      flags.untrustedPolicy !== undefined && '--untrusted-policy',
      Object.keys(protocolArgs).length > 0 && '--protocol-arg',
      flags.monitor !== undefined && '--monitor',
      Object.keys(monitorArgs).length > 0 && '--monitor-arg',
    ].filter(Boolean);
    if (given.length) throw new ConfigError(`${given.join(', ')}: only with --protocol (${PROTOCOL_NAMES.join(' or ')})`);
    return { policy: flags.policy ?? 'test' };
  }
  const def = PROTOCOLS.find((p) => p.name === flags.protocol);
  if (!def) throw new ConfigError(`unknown protocol "${flags.protocol}"; protocols: ${PROTOCOL_NAMES.join(', ')} (\`ct protocols list\` describes them)`);
  if (flags.policy !== undefined) {
    throw new ConfigError(`--policy and --protocol do not go together: under a protocol the agent is --untrusted-policy NAME (its -p arguments as usual)`);
  }
  if (!flags.untrustedPolicy) throw new ConfigError(`--protocol ${def.name} needs --untrusted-policy NAME (honest, attack, obvious-attack, or path/to/module.ts:exportName)`);
  if (MODEL_FREE_POLICIES.includes(flags.untrustedPolicy)) {
    throw new ConfigError(`--untrusted-policy ${flags.untrustedPolicy} calls no model, so a protocol has no actions to review; use honest, attack, obvious-attack or your own model policy`);
  }
  for (const k of Object.keys(protocolArgs)) {
    if (!(k in def.args)) throw new ConfigError(`protocol ${def.name} has no argument "${k}"; its arguments: ${Object.keys(def.args).join(', ')}`);
  }
  if (protocolArgs.sus_threshold !== undefined && protocolArgs.audit_threshold !== undefined) {
    throw new ConfigError('--protocol-arg sus_threshold is another name for audit_threshold: give one of them');
  }
  const audit = threshold('audit_threshold', protocolArgs.audit_threshold ?? protocolArgs.sus_threshold);
  const defer = threshold('defer_threshold', protocolArgs.defer_threshold);
  if (def.name === 'trusted-monitoring' && audit === undefined) {
    throw new ConfigError('--protocol trusted-monitoring needs --protocol-arg audit_threshold=N (0-10): actions scored above it are audited');
  }
  if (def.name === 'defer-to-trusted' && defer === undefined) {
    throw new ConfigError('--protocol defer-to-trusted needs --protocol-arg defer_threshold=N (0-10): actions scored above it are replaced by the trusted model\'s');
  }
  const trustedModel = def.name === 'defer-to-trusted' ? (protocolArgs.trusted_model ?? def.args.trusted_model!.default!).trim() : undefined;
  if (trustedModel === '') throw new ConfigError('--protocol-arg trusted_model= needs a model or alias');
  const monitorName = flags.monitor ?? DEFAULT_PROTOCOL_MONITOR;
  checkMonitor(monitorName, monitorArgs);
  return {
    policy: flags.untrustedPolicy,
    protocol: {
      name: def.name,
      ...(audit !== undefined ? { audit_threshold: audit } : {}),
      ...(defer !== undefined ? { defer_threshold: defer } : {}),
      ...(trustedModel !== undefined ? { trusted_model: trustedModel } : {}),
      monitor: { name: monitorName, args: monitorArgs },
    },
  };
}

function threshold(key: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const n = value.trim() === '' ? NaN : Number(value);
  if (!Number.isFinite(n) || n < 0 || n > 10) throw new ConfigError(`--protocol-arg ${key} must be a number from 0 to 10, got "${value}"`);
  return n;
}

/** A protocol asks an action monitor before each action: a built-in one, with arguments it takes. */
function checkMonitor(name: string, args: Record<string, string>): void {
  const def = BUILTIN_MONITORS.find((m) => m.name === name);
  const actionMonitors = BUILTIN_MONITORS.filter((m) => m.name !== 'trajectory').map((m) => m.name);
  if (!def || !actionMonitors.includes(name)) {
    const why = def ? `monitor ${name} rates whole transcripts, not actions` : `unknown monitor "${name}"`;
    throw new ConfigError(`--monitor ${name}: ${why}; a protocol asks one of: ${actionMonitors.join(', ')}`);
  }
  for (const k of Object.keys(args)) {
    if (!(k in def.args)) throw new ConfigError(`monitor ${name} has no argument "${k}"; its arguments: ${Object.keys(def.args).join(', ')}`);
  }
}
