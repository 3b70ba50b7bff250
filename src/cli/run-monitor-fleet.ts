/**
 * `ct run monitor --fleet` / `--ec2`: a monitor pass with one job per sample on a fleet of
 * workers (control/monitor-fleet.ts), driven by the same controller as `ct run eval --fleet`
 * (`controlFleet`): queues, ledger, attempts, resume, launchers, code artifact and secrets.
 */
import { resolve } from 'node:path';
import type { Config } from '../config/config.js';
import { buildMonitorManifest, monitorFleetResults, uploadMonitorInputs } from '../control/monitor-fleet.js';
import type { Monitor } from '../control/monitor-types.js';
import { ConfigError } from '../errors.js';
import { compileFleetPlan, type FleetFlags } from '../eval/run-plan.js';
import type { RunFleetResult } from '../fleet/controller.js';
import { isMonitorManifest, type MonitorManifest } from '../fleet/protocol.js';
import { controlFleet } from './run-fleet.js';

export interface MonitorFleetInput {
  logs: string[];
  flags: FleetFlags & { monitor: string; monitorArg: Record<string, string>; json?: boolean; quiet?: boolean; cache: boolean };
  config: Config;
  monitor: Monitor;
  outDir: string;
  version: string;
  argv: string[];
}

/** Runs the monitor fleet's controller; returns the exit code. */
export async function runMonitorFleetCommand(o: MonitorFleetInput): Promise<number> {
  const { flags, config } = o;
  if (flags.workerSetup !== undefined) throw new ConfigError('--worker-setup applies to eval fleets (monitor workers run no sandbox)');
  // Local and external workers rate this many samples at once; EC2 ones as their size allows (or --concurrency).
  const fleet = compileFleetPlan(config, flags, { samplesPerWorker: config.monitor.max_connections });
  const { resolveExtraSrc, packExtraSrc } = await import('../fleet/extra-src.js');
  const packed = resolveExtraSrc(fleet.extraSrc, process.cwd()).map(packExtraSrc);
  let manifestOf: MonitorManifest | undefined;
  return controlFleet({
    flags: { ...(flags.json ? { json: true } : {}), ...(flags.quiet ? { quiet: true } : {}) },
    config,
    fleet,
    logDir: o.outDir,
    version: o.version,
    argv: o.argv,
    extraSrc: packed,
    build: async ({ perWorker, code }) => {
      const built = await buildMonitorManifest({
        logs: o.logs,
        monitorName: flags.monitor,
        monitor: o.monitor,
        args: flags.monitorArg,
        perWorker,
        maxAttempts: fleet.maxAttempts,
        code,
        extraSrc: packed,
        cwd: process.cwd(),
      });
      manifestOf = built.manifest;
      return built;
    },
    upload: async (store, manifest, note) => {
      if (isMonitorManifest(manifest)) await uploadMonitorInputs(store, manifest, note);
    },
    results: (store, manifest) => monitorFleetResults({ store, manifest: manifest as MonitorManifest, monitor: o.monitor, outDir: o.outDir, version: o.version }),
    // Local workers share this machine's reply cache (and its --cache-dir / --no-cache).
    localWorkerEnv: { CT_MONITOR_CACHE_DIR: config.monitor.cache_dir!, CT_MONITOR_CACHE: String(config.monitor.cache) },
    earlierLog: (prior) => (isMonitorManifest(prior) ? prior.inputs.map((i) => resolve(o.outDir, i.name)) : []),
    summary: (r, fleetId) => printSummary(r, fleetId, manifestOf!, o),
  });
}

function printSummary(r: RunFleetResult, fleetId: string, manifest: MonitorManifest, o: MonitorFleetInput): number {
  const m = r.merge!;
  const dead = m.rows.filter((x) => x.dead);
  const scored = m.rows.filter((x) => x.scores).length;
  if (o.flags.json) {
    process.stdout.write(
      `${JSON.stringify({
        fleet_id: fleetId,
        monitor: { name: o.monitor.name, level: o.monitor.level, model: o.monitor.model ?? null },
        logs: (m.paths ?? [m.path]).map((output, i) => ({ input: manifest.inputs[i]?.path ?? null, output })),
        status: m.status,
        enqueued: r.enqueued,
        retried: r.retried,
        launched: r.launched.length,
        samples: m.rows.length,
        scored,
        unmonitored: dead.map((x) => x.jobId),
        missing: m.missing,
      })}\n`,
    );
  } else {
    const lines = [
      `fleet ${fleetId}: ${r.enqueued} job(s) enqueued${r.retried ? ` (${r.retried} error result(s) retried)` : ''}, ${r.launched.length} worker(s) launched`,
      `monitor ${o.monitor.name}${o.monitor.model ? ` (${o.monitor.model})` : ''}: ${manifest.inputs.length} log(s), ${m.rows.length} sample(s), ${scored} with a score` +
        (dead.length ? `; ${dead.length} not monitored (failed on every attempt, copied unmonitored): ${dead.map((x) => x.jobId).join(', ')}` : ''),
    ];
    if (m.missing.length) lines.push(`jobs without a result: ${m.missing.join(', ')}`);
    lines.push(`monitored logs (${o.outDir}):`, ...(m.paths ?? [m.path]).map((p) => `  ${p}`));
    process.stdout.write(`${lines.join('\n')}\n`);
  }
  return dead.length > 0 || m.missing.length > 0 ? 1 : 0;
}
