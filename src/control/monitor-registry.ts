import { ConfigError } from '../errors.js';
import { definitionFromExport, type PluginKind } from '../host/user-definition.js';
import { loadUserExport } from '../host/user-module.js';
import { isExternalPolicySpec } from '../policies/external-policy.js';
import { checkedArgs } from '../policies/registry.js';
import type { Monitor, MonitorDefinition, MonitorEnvironment } from './monitor-types.js';
import { BUILTIN_MONITORS } from './monitors.js';

export interface CreateMonitorOptions extends MonitorEnvironment {
  /** Import roots for `module:export` monitors, searched in order (default: just cwd). */
  importRoots?: string[];
}

/**
 * The monitor `spec` names, built with its `-p` arguments: a built-in name (basic, ensemble,
 * trajectory) or `path/or/pkg:exportName` for the user's own, loaded as policies are
 * (host/user-module.ts). The export may be a MonitorDefinition ({name, args, create}), a Monitor
 * ({name, level, rateAction | rateTrajectory}) or a function `(args, env) => Monitor`. Unknown
 * names and arguments, bad values and unusable models are ConfigErrors.
 */
export async function createMonitor(spec: string, args: Record<string, string>, env: CreateMonitorOptions): Promise<Monitor> {
  let def = BUILTIN_MONITORS.find((m) => m.name === spec);
  if (!def) {
    if (!isExternalPolicySpec(spec)) {
      throw new ConfigError(
        `unknown monitor "${spec}"; built-in monitors: ${BUILTIN_MONITORS.map((m) => m.name).join(', ')} (or path/to/module.ts:exportName for your own)`,
      );
    }
    def = asDefinition(await loadUserExport(spec, { roots: env.importRoots ?? [env.cwd], flag: '--monitor' }), spec);
  }
  const withDefaults = checkedArgs('monitor', def, args);
  return def.create(withDefaults, { models: env.models, calls: env.calls, cwd: env.cwd });
}

const MONITOR_KIND: PluginKind<Monitor> = {
  flag: '--monitor',
  noun: 'monitor',
  shapes:
    'a MonitorDefinition ({name, args, create(args, env)}), a Monitor ({name, level, rateAction(view) or rateTrajectory(view)}) or a function (args, env) => Monitor',
  isInstance: (v) => typeof (v as Partial<Monitor>).rateAction === 'function' || typeof (v as Partial<Monitor>).rateTrajectory === 'function',
  check: checkMonitor,
};

function asDefinition(value: unknown, spec: string): MonitorDefinition {
  return definitionFromExport<Monitor, MonitorEnvironment>(value, spec, MONITOR_KIND) as MonitorDefinition;
}

function checkMonitor(m: unknown, spec: string): Monitor {
  const monitor = m as Partial<Monitor> | undefined;
  const action = typeof monitor?.rateAction === 'function';
  const trajectory = typeof monitor?.rateTrajectory === 'function';
  if (!monitor || (!action && !trajectory)) {
    throw new ConfigError(`--monitor ${spec}: create() did not return a monitor (an object with rateAction(view) or rateTrajectory(view))`);
  }
  const level = monitor.level ?? (action ? 'action' : 'trajectory');
  if ((level === 'action' && !action) || (level === 'trajectory' && !trajectory)) {
    throw new ConfigError(`--monitor ${spec}: a monitor of level "${level}" needs ${level === 'action' ? 'rateAction' : 'rateTrajectory'}(view)`);
  }
  if (level !== 'action' && level !== 'trajectory') throw new ConfigError(`--monitor ${spec}: level must be "action" or "trajectory", got "${String(level)}"`);
  return {
    name: typeof monitor.name === 'string' && monitor.name ? monitor.name : spec,
    ...(monitor.model ? { model: monitor.model } : {}),
    level,
    ...(action ? { rateAction: monitor.rateAction!.bind(monitor) } : {}),
    ...(trajectory ? { rateTrajectory: monitor.rateTrajectory!.bind(monitor) } : {}),
  };
}
