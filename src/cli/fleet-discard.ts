/**
 * `ct fleet discard FLEET_ID`: removes one fleet's queues and SSM secrets (and with
 * --delete-results its objects in the bucket), after showing what goes and asking. A fleet with
 * a live worker instance is refused: it may still be running, and its workers would keep
 * costing money with nothing to take jobs from.
 */
import { createInterface } from 'node:readline/promises';
import { ConfigError } from '../errors.js';

export interface DiscardFlags {
  region?: string;
  yes?: boolean;
  deleteResults?: boolean;
  json?: boolean;
}

/** Discards the fleet; returns the exit code (1 when something could not be removed). */
export async function discardCommand(fleetId: string, flags: DiscardFlags): Promise<number> {
  const { inventoryOptions, withCloud } = await import('./cloud.js');
  const { gatherFleet, isLive } = await import('../cloud/inventory.js');
  const { age } = await import('../cloud/status-report.js');
  const { applyCleanup, fleetLeftovers } = await import('../cloud/cleanup.js');
  const { fleetNames } = await import('../fleet/protocol.js');
  const { fleetSecretsPath } = await import('../fleet/secrets.js');
  let code = 0;
  await withCloud(flags, async (config, _caller, c) => {
    const bucket = config.fleet.bucket;
    const results = `s3://${bucket}/${fleetId}/`;
    let names: import('../fleet/protocol.js').FleetNames;
    try {
      names = fleetNames(fleetId, config.fleet.queue_prefix);
    } catch (e) {
      throw new ConfigError(`fleet id ${fleetId}: ${(e as Error).message}`);
    }
    const f = await gatherFleet(inventoryOptions(config, c), fleetId);
    const live = f.instances.filter(isLive);
    if (!f.queues.length && !f.secrets.length && !f.objects && !live.length) {
      throw new ConfigError(
        `no fleet ${fleetId} in ${c.region}: no queue ${names.workQueue} (or -done, -dlq), no object under ${results}, ` +
          `no secret under ${fleetSecretsPath(config.fleet.secrets_prefix, fleetId)}`,
      );
    }
    if (live.length) {
      const ids = live.map((i) => i.id).join(' ');
      throw new ConfigError(
        `fleet ${fleetId} has ${live.length} live worker instance(s) (${ids}) and may still be running; nothing was removed. ` +
          'Stop its controller (Ctrl-C), or terminate the workers: `ct cloud cleanup --yes` does once the fleet is finished or the ' +
          `workers are past fleet.instance_max_hours, else \`aws ec2 terminate-instances --region ${c.region} --instance-ids ${ids}\`; then discard it`,
      );
    }
    const state = f.finished ? 'finished' : f.abandoned ? 'abandoned' : 'unfinished';
    const plan = fleetLeftovers(f, `discard fleet ${fleetId}`, { deleteResults: Boolean(flags.deleteResults), bucket });
    const resultsKept = f.objects > 0 && !flags.deleteResults;
    const say = (line: string) => (flags.json ? process.stderr : process.stdout).write(`${line}\n`);
    const idle = f.idleSeconds !== undefined ? `no progress for ${age(f.idleSeconds)}` : 'no progress known';
    const backlog = f.jobs !== undefined ? `; ${f.unfinished} of ${f.jobs} job(s) without a result` : '';
    say(
      `fleet ${fleetId}${f.owners.length ? ` (${f.owners.join(', ')})` : ''}: ${state}, ${idle}${backlog}; ` +
        `queue ${f.counts.visible} visible / ${f.counts.inFlight} in flight / ${f.counts.dlq} DLQ`,
    );
    if (state === 'unfinished' && f.idleSeconds !== undefined) {
      process.stderr.write(
        `warning: fleet ${fleetId} made progress ${age(f.idleSeconds)} ago (less than fleet.stale_teardown_minutes, ${config.fleet.stale_teardown_minutes} min): ` +
          'a controller may still be running it with local or external workers, and would lose its queues\n',
      );
    }
    for (const l of plan) say(`  ${l.kind.padEnd(10)} ${l.label}`);
    if (resultsKept) say(`kept: ${results} (${f.objects} object(s), ${f.results} result(s)); --delete-results removes them`);
    const report = (removed: Array<{ kind: string }>, failed: unknown[], discarded: boolean) => {
      if (flags.json) {
        process.stdout.write(
          `${JSON.stringify({
            region: c.region,
            fleetId,
            owners: f.owners,
            state,
            ...(f.idleSeconds !== undefined ? { idleSeconds: f.idleSeconds } : {}),
            ...(f.jobs !== undefined ? { jobs: f.jobs, unfinished: f.unfinished } : {}),
            counts: f.counts,
            discarded,
            removed,
            failed,
            results: !f.objects ? 'none' : removed.some((l) => l.kind === 'results') ? 'deleted' : 'kept',
          })}\n`,
        );
      }
    };
    if (!plan.length) {
      say(`nothing to remove for fleet ${fleetId}`);
      report([], [], true);
      return;
    }
    if (!flags.yes) {
      if (!process.stdin.isTTY) throw new ConfigError(`no terminal to confirm on: pass --yes to discard fleet ${fleetId}`);
      const rl = createInterface({ input: process.stdin, output: process.stderr });
      const answer = await rl.question(`Discard fleet ${fleetId} (${plan.length} item(s) above)? [y/N] `);
      rl.close();
      if (!/^y(es)?$/i.test(answer.trim())) {
        say(`fleet ${fleetId} not discarded`);
        report([], [], false);
        return;
      }
    }
    const r = await applyCleanup(plan, c, { bucket });
    if (r.failed.length) code = 1;
    for (const l of r.removed) say(`removed ${l.kind} ${l.label}`);
    for (const l of r.failed) process.stderr.write(`could not remove ${l.kind} ${l.label}: ${l.error}\n`);
    say(
      `fleet ${fleetId}${r.failed.length ? '' : ' discarded'}: removed ${r.removed.length} of ${plan.length} item(s)` +
        (r.failed.length ? '; run again later for the rest' : resultsKept ? `; results kept in ${results}` : ''),
    );
    report(r.removed, r.failed, r.failed.length === 0);
  });
  return code;
}
