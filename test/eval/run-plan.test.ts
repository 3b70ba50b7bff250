/**
 * The run compiled once (`compileRun`): every flag resolved in one place, so the estimate, the
 * launcher, the fleet id and the log all read the same decision.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { loadConfig } from '../../src/config/config.js';
import { ConfigError } from '../../src/errors.js';
import { defaultMaxSamples } from '../../src/eval/capacity.js';
import { compileRun, planIdInputs, type RunFlags } from '../../src/eval/run-plan.js';
import { fleetId } from '../../src/fleet/fleet-id.js';

const cwd = mkdtempSync(join(tmpdir(), 'ct-plan-'));
after(() => rmSync(cwd, { recursive: true, force: true }));

const config = (env: Record<string, string> = {}) => loadConfig({ cwd, env });
const flags = (extra: Partial<RunFlags> = {}): RunFlags => ({ env: ['notes_app'], epochs: 2, failOnError: true, policy: 'test', policyArg: {}, sandbox: 'docker', extraSrc: [], ...extra });
/** A fleet id from the plan's part and fixed other inputs. */
const idOf = (plan: ReturnType<typeof compileRun>) => fleetId({ ...planIdInputs(plan), codeSha: 'a'.repeat(40), sampleIds: ['notes_app:create_greeting'] });

describe('compileRun', () => {
  test('a local run: --max-samples, else this machine; fail_on_error in the sample options; the task name', () => {
    const p = compileRun(config(), flags({ failOnError: false }));
    assert.equal(p.fleet, undefined);
    assert.equal(p.maxSamples, defaultMaxSamples());
    assert.equal(p.sampleOptions.failOnError, false);
    assert.equal(p.taskName, 'notes_app');
    assert.equal(compileRun(config(), flags({ maxSamples: 3, taskFile: 'sets/demo.jsonl' })).maxSamples, 3);
    assert.equal(compileRun(config(), flags({ taskFile: 'sets/demo.jsonl' })).taskName, 'demo');
  });

  test('two --ec2 runs that differ only in the instance type are two fleets', () => {
    const a = compileRun(config({ CT_EC2_INSTANCE_TYPE: 'c7i.4xlarge' }), flags({ ec2: true }));
    const b = compileRun(config({ CT_EC2_INSTANCE_TYPE: 'c5.metal' }), flags({ ec2: true }));
    assert.equal(a.fleet!.instanceType, 'c7i.4xlarge');
    assert.notEqual(idOf(a), idOf(b));
    // Off EC2 the type is not part of the run.
    const local = compileRun(config({ CT_EC2_INSTANCE_TYPE: 'c5.metal' }), flags({ fleet: true, workers: 'local:1' }));
    assert.equal(local.fleet!.instanceType, undefined);
  });

  test('spot is decided once: --spot over fleet.spot false, --on-demand over the default, off EC2 never', () => {
    assert.equal(compileRun(config({ CT_FLEET_SPOT: 'false' }), flags({ ec2: true, spot: true })).fleet!.spot, true);
    assert.equal(compileRun(config({ CT_FLEET_SPOT: 'false' }), flags({ ec2: true })).fleet!.spot, false);
    assert.equal(compileRun(config(), flags({ ec2: true, onDemand: true })).fleet!.spot, false);
    assert.equal(compileRun(config(), flags({ ec2: true })).fleet!.spot, true);
    assert.equal(compileRun(config(), flags({ fleet: true, workers: 'external' })).fleet!.spot, false);
  });

  test('fail_on_error does not split a fleet (it only judges results); a limit does', () => {
    const strict = compileRun(config(), flags({ fleet: true, workers: 'local:1' }));
    const lenient = compileRun(config(), flags({ fleet: true, workers: 'local:1', failOnError: false }));
    assert.equal(idOf(strict), idOf(lenient));
    assert.notEqual(idOf(strict), idOf(compileRun(config(), flags({ fleet: true, workers: 'local:1', messageLimit: 5 }))));
  });

  test('workers per kind: local ones share the machine, external ones take fleet.samples_per_worker, EC2 ones --concurrency or the instance', () => {
    assert.equal(compileRun(config(), flags({ fleet: true, workers: 'local:2' })).fleet!.perWorker, Math.ceil(defaultMaxSamples() / 2));
    assert.equal(compileRun(config(), flags({ fleet: true, workers: 'local:2', maxSamples: 5 })).fleet!.perWorker, 5);
    assert.equal(compileRun(config({ CT_FLEET_SAMPLES_PER_WORKER: '7' }), flags({ fleet: true, workers: 'external' })).fleet!.perWorker, 7);
    assert.equal(compileRun(config(), flags({ ec2: true, concurrency: 4 })).fleet!.perWorker, 4);
    assert.equal(compileRun(config(), flags({ ec2: true })).fleet!.perWorker, undefined);
    assert.equal(compileRun(config(), flags({ fleet: true, workers: 'external', retryErrors: false })).fleet!.retryErrors, false);
  });

  test('a per-worker count the user gave (--concurrency, --max-samples) is fixed; a default is where adaptive workers start', () => {
    assert.equal(compileRun(config(), flags({ ec2: true, concurrency: 4 })).fleet!.fixedPerWorker, true);
    assert.equal(compileRun(config(), flags({ ec2: true })).fleet!.fixedPerWorker, false);
    assert.equal(compileRun(config(), flags({ fleet: true, workers: 'local:2', maxSamples: 5 })).fleet!.fixedPerWorker, true);
    assert.equal(compileRun(config(), flags({ fleet: true, workers: 'local:2' })).fleet!.fixedPerWorker, false);
    assert.equal(compileRun(config({ CT_FLEET_SAMPLES_PER_WORKER: '7' }), flags({ fleet: true, workers: 'external' })).fleet!.fixedPerWorker, false);
  });

  test('flags that do not go together are refused (exit 2)', () => {
    const bad: Array<[Partial<RunFlags>, RegExp]> = [
      [{ workers: 'local:2' }, /--workers only apply to fleet runs/],
      [{ retryErrors: false }, /--no-retry-errors only apply to fleet runs/],
      [{ ec2: true, workers: 'local:1' }, /--ec2 means --workers ec2/],
      [{ ec2: true, spot: true, onDemand: true }, /exclude each other/],
      [{ fleet: true, workers: 'local:1', spot: true }, /apply to EC2 workers/],
      [{ trajectory: 'x.jsonl' }, /--trajectory goes with --policy replay/],
    ];
    for (const [extra, message] of bad) assert.throws(() => compileRun(config(), flags(extra)), (e: unknown) => e instanceof ConfigError && message.test(e.message), JSON.stringify(extra));
  });
});
