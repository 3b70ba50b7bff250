/**
 * A run, compiled once. `compileRun(config, flags)` resolves the config layers and the command's
 * flags into one plan that every part of the run reads — the local runner, the fleet controller
 * (and through the manifest it writes, the fleet's workers), mtgen — so no module re-resolves a
 * flag or restates a default. Stages: the config is already defaults < files < env < flags,
 * zod-validated (config.ts); here flags that are not config keys are checked against each other
 * and folded in; what only AWS can say (an EC2 instance type's size) is filled in by the
 * controller's read-only planning step, before anything is created.
 */
import { basename } from 'node:path';
import type { Config } from '../config/config.js';
import { compileProtocol, type ProtocolFlags, type ProtocolPlan } from '../control/protocol-plan.js';
import { ConfigError } from '../errors.js';
import type { FleetTimings } from '../fleet/controller.js';
import { fleetWorkerCount, parseWorkersSpec, type WorkersSpec } from '../fleet/launcher.js';
import { checkLocalSandbox } from '../sandbox/local/local-provider.js';
import { defaultMaxSamples } from './capacity.js';
import { buildSampleOptions, resultOptions, type SampleOptionFlags, type SampleOptions } from './sample-options.js';

/** The flags of `ct run eval` a plan is compiled from (commander's names). */
export interface RunFlags extends SampleOptionFlags, ProtocolFlags {
  env: string[];
  taskFile?: string;
  epochs: number;
  maxSamples?: number;
  failOnError: boolean;
  /** The agent (default test); under `--protocol` it is `--untrusted-policy` instead. */
  policy?: string;
  policyArg: Record<string, string>;
  trajectory?: string;
  sandbox: string;
  /** `--unsafe-local`: `--sandbox local` may run an agent other than the built-in `test` policy. */
  unsafeLocal?: boolean;
  // Fleet flags (only with --fleet / --ec2).
  fleet?: boolean;
  ec2?: boolean;
  workers?: string;
  maxWorkers?: number;
  estimate?: boolean;
  yes?: boolean;
  newFleet?: boolean;
  extraSrc: string[];
  workerSetup?: string;
  price?: number;
  spot?: boolean;
  onDemand?: boolean;
  concurrency?: number;
  retryErrors?: boolean;
}

export interface RunPlan {
  /** The log's task name: the task file's name, else the environments joined by `+`. */
  taskName: string;
  epochs: number;
  /** The agent: `--policy`, or under a protocol `--untrusted-policy`, with its `-p` arguments. */
  policy: { name: string; args: Record<string, string> };
  /** `--protocol`: the monitor and rule the policy's actions go through (absent: none). */
  protocol?: ProtocolPlan;
  /** `--sandbox`: docker, local, ssh://..., ec2, or module:export. */
  sandbox: string;
  /** What every `--sandbox local` run prints (it is not isolated); absent for other sandboxes. */
  localSandboxWarning?: string;
  /** `--unsafe-local` was given (a `--sandbox local` fleet's workers are told, in the manifest). */
  unsafeLocal: boolean;
  /** Limits, timeouts and fail_on_error every sample shares (the fleet's manifest carries them). */
  sampleOptions: SampleOptions;
  /** Samples a local run keeps going at once: --max-samples, else from this machine's CPUs and memory. */
  maxSamples: number;
  logDir: string;
  /** Present for `--fleet` / `--ec2` runs. */
  fleet?: FleetPlan;
}

export interface FleetPlan {
  workers: WorkersSpec;
  /** `--max-workers`, else fleet.max_workers. */
  maxWorkers: number;
  /** Workers started at most: local:N (within the limits), else maxWorkers. */
  workerCount: number;
  /**
   * Samples each worker runs at once. Local workers share this machine (together what one local
   * run would take); external ones take fleet.samples_per_worker; EC2 ones `--concurrency`, else
   * undefined here and read from the instance type's size by the controller.
   */
  perWorker?: number;
  /** `perWorker` was given (`--concurrency`, `--max-samples`): workers run exactly that many; else they start there and adapt. */
  fixedPerWorker: boolean;
  /** EC2: spot (on-demand when spot capacity is refused) or on-demand only; false off EC2. */
  spot: boolean;
  /** EC2 workers' instance type (it enters the fleet id); absent for local and external workers. */
  instanceType?: string;
  /** `--price`: USD per worker instance-hour instead of fleet.price_per_hour and the price table (the estimate reads those). */
  pricePerHour?: number;
  /** A rerun queues the jobs whose result is an error again (`--no-retry-errors` keeps them). */
  retryErrors: boolean;
  newFleet: boolean;
  estimate: boolean;
  yes: boolean;
  extraSrc: string[];
  workerSetup?: string;
  /** Attempts of a job before it is dead-lettered (fleet.max_receive_count). */
  maxAttempts: number;
  timings: FleetTimings;
}

/** Compiles the run `flags` describe under `config`; a ConfigError (exit 2) for flags that do not go together. */
export function compileRun(config: Config, flags: RunFlags): RunPlan {
  const args = { ...flags.policyArg };
  const { policy, protocol } = compileProtocol(flags);
  if (flags.trajectory) {
    if (policy !== 'replay') throw new ConfigError('--trajectory goes with --policy replay');
    const [file, id] = flags.trajectory.split('#', 2);
    args.trajectory = file!;
    if (id) args.sample_id = id;
  }
  const sampleOptions = buildSampleOptions(config, flags);
  const localSandboxWarning = checkLocalSandbox(flags.sandbox, { policy, args, protocol: protocol !== undefined }, Boolean(flags.unsafeLocal));
  const plan: RunPlan = {
    taskName: flags.taskFile ? basename(flags.taskFile).replace(/\.(jsonl|txt)$/, '') : flags.env.map((e) => e.split(':').pop()).join('+') || 'ct',
    epochs: flags.epochs,
    policy: { name: policy, args },
    ...(protocol ? { protocol } : {}),
    sandbox: flags.sandbox,
    ...(localSandboxWarning ? { localSandboxWarning } : {}),
    unsafeLocal: Boolean(flags.unsafeLocal),
    sampleOptions,
    maxSamples: flags.maxSamples ?? defaultMaxSamples(),
    logDir: config.log_dir,
  };
  if (!(flags.fleet || flags.ec2)) {
    checkNoFleetFlags(flags);
    return plan;
  }
  plan.fleet = compileFleetPlan(config, flags, { ...(flags.maxSamples !== undefined ? { samplesPerWorker: flags.maxSamples } : {}) });
  return plan;
}

/** The fleet flags a fleet-mode command shares (`addFleetOptions`). */
export type FleetFlags = Pick<
  RunFlags,
  'fleet' | 'ec2' | 'workers' | 'maxWorkers' | 'estimate' | 'yes' | 'newFleet' | 'extraSrc' | 'workerSetup' | 'price' | 'spot' | 'onDemand' | 'concurrency' | 'retryErrors'
>;

/**
 * The fleet part of a plan, from the fleet flags (`ct run eval --fleet`, `ct run monitor --fleet`);
 * `samplesPerWorker`: what local and external workers run at once when the command decides it.
 */
export function compileFleetPlan(config: Config, flags: FleetFlags, o: { samplesPerWorker?: number } = {}): FleetPlan {
  if (flags.ec2 && flags.workers !== undefined && flags.workers !== 'ec2') throw new ConfigError(`--ec2 means --workers ec2; it cannot go with --workers ${flags.workers}`);
  const workers = parseWorkersSpec(flags.ec2 ? 'ec2' : (flags.workers ?? 'ec2'));
  if (flags.spot && flags.onDemand) throw new ConfigError('--spot and --on-demand exclude each other');
  if (workers.kind !== 'ec2' && (flags.spot || flags.onDemand || flags.concurrency !== undefined || flags.price !== undefined)) {
    throw new ConfigError('--spot, --on-demand, --concurrency and --price apply to EC2 workers (--ec2 or --workers ec2)');
  }
  const maxWorkers = flags.maxWorkers ?? config.fleet.max_workers;
  const workerCount = fleetWorkerCount(workers, { maxWorkers, fromFlag: flags.maxWorkers !== undefined });
  const perWorker =
    workers.kind === 'ec2'
      ? flags.concurrency
      : (o.samplesPerWorker ?? (workers.kind === 'local' ? Math.max(1, Math.ceil(defaultMaxSamples() / workerCount)) : config.fleet.samples_per_worker));
  const pricePerHour = flags.price;
  return {
    workers,
    maxWorkers,
    workerCount,
    ...(perWorker !== undefined ? { perWorker } : {}),
    fixedPerWorker: workers.kind === 'ec2' ? flags.concurrency !== undefined : o.samplesPerWorker !== undefined,
    spot: workers.kind === 'ec2' && (flags.onDemand ? false : flags.spot ? true : config.fleet.spot),
    ...(workers.kind === 'ec2' ? { instanceType: config.ec2.instance_type } : {}),
    ...(pricePerHour !== undefined ? { pricePerHour } : {}),
    retryErrors: flags.retryErrors !== false,
    newFleet: Boolean(flags.newFleet),
    estimate: Boolean(flags.estimate),
    yes: Boolean(flags.yes),
    extraSrc: flags.extraSrc,
    ...(flags.workerSetup !== undefined ? { workerSetup: flags.workerSetup } : {}),
    maxAttempts: config.fleet.max_receive_count,
    timings: {
      visibilityTimeout: config.fleet.visibility_timeout,
      maxAttempts: config.fleet.max_receive_count,
      pollSeconds: config.fleet.poll_seconds,
      checkSeconds: config.fleet.check_seconds,
      staleWarningMinutes: config.fleet.stale_warning_minutes,
      staleTeardownMinutes: config.fleet.stale_teardown_minutes,
    },
  };
}


/** The parts of the fleet id a plan decides (the controller adds the code, settings, samples and shipped trees). */
export function planIdInputs(plan: RunPlan): {
  policy: RunPlan['policy'];
  protocol?: ProtocolPlan;
  epochs: number;
  sandbox: string;
  instanceType?: string;
  options: Record<string, unknown>;
} {
  return {
    policy: plan.policy,
    // A protocol (its thresholds, monitor, trusted model) changes what runs: another fleet.
    ...(plan.protocol ? { protocol: plan.protocol } : {}),
    epochs: plan.epochs,
    sandbox: plan.sandbox,
    ...(plan.fleet?.instanceType ? { instanceType: plan.fleet.instanceType } : {}),
    // fail_on_error only judges results: changing it resumes the fleet and merges again.
    options: { sample_options: resultOptions(plan.sampleOptions) },
  };
}

/** Fleet flags given without --fleet are refused rather than ignored. */
export function checkNoFleetFlags(flags: FleetFlags): void {
  const given = [
    flags.workers !== undefined && '--workers',
    flags.maxWorkers !== undefined && '--max-workers',
    flags.estimate && '--estimate',
    flags.newFleet && '--new-fleet',
    flags.extraSrc.length > 0 && '--extra-src',
    flags.workerSetup !== undefined && '--worker-setup',
    flags.price !== undefined && '--price',
    flags.spot && '--spot',
    flags.onDemand && '--on-demand',
    flags.concurrency !== undefined && '--concurrency',
    flags.retryErrors === false && '--no-retry-errors',
  ].filter(Boolean);
  if (given.length) throw new ConfigError(`${given.join(', ')} only apply to fleet runs; add --fleet (or --ec2)`);
}
