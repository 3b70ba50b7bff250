/**
 * What the fleet's parts say to each other, and where they put it. The controller (the user's
 * `ct run eval --ec2`) writes a manifest to S3 and one job message per sample-epoch to the work
 * queue; a worker takes a job, runs the sample, uploads its one-sample `.eval` to S3 under the
 * job's id, sends a done message, and only then deletes the job. SQS delivers at least once;
 * results are keyed by job id, so a job run twice overwrites its own result instead of adding a
 * second one (at-least-once delivery, exactly-once results).
 *
 *   S3     {fleet_id}/manifest.json            the run: policy, options, every job
 *          {fleet_id}/queue-ledger.json        what the controllers queued (generations), see below
 *          {fleet_id}/{job_id}.eval            one job's result (a one-sample Inspect log)
 *          {fleet_id}/errors/{kind}/{job_id}.json  a result that is an error (a rerun retries these)
 *          {fleet_id}/inputs/{job_id}.eval     a monitor fleet's job input (the sample to rate)
 *          {fleet_id}/logs/{worker}-*.log      worker logs
 *          artifacts/{sha}.tar.gz              the code workers run (a git SHA), or an
 *                                              --extra-src tree (the sha256 of its archive)
 *   SQS    {prefix}{fleet_id}-work / -done / -dlq
 */
import { z } from 'zod';
import { ConfigError } from '../errors.js';
import { protocolPlanSchema } from '../control/protocol-plan.js';
import { sampleOptionsSchema } from '../eval/sample-options.js';

/** Bump when a message or manifest changes shape; workers refuse what they do not know. */
export const PROTOCOL_VERSION = 2;

/** One sample-epoch of the run. */
export const jobSchema = z.object({
  job_id: z.string().regex(/^[A-Za-z0-9._-]{1,200}$/),
  /** The sample's id (`env:main` or `env:main:side`). */
  sample_id: z.string().min(1),
  /** The setting the environment comes from (workers pull it). */
  setting: z.string().min(1),
  env: z.string().min(1),
  main_task: z.string().min(1),
  side_task: z.string().min(1).optional(),
  epoch: z.number().int().min(1),
});
export type Job = z.infer<typeof jobSchema>;

/**
 * One sample-epoch of an existing log that a monitor fleet rates (`kind: 'monitor'`): the
 * sample `sample_id`/`epoch` of the manifest's input `input`, stored in the bucket as a
 * one-sample log at `{fleet_id}/inputs/{job_id}.eval`.
 */
export const monitorJobSchema = z.object({
  job_id: jobSchema.shape.job_id,
  sample_id: z.string().min(1),
  epoch: z.number().int().min(1),
  /** Index of the log the sample comes from in the manifest's `inputs`. */
  input: z.number().int().min(0),
});
export type MonitorJob = z.infer<typeof monitorJobSchema>;

/** A job of either kind of fleet, as a queue message carries it (the manifest says which kind). */
export const anyJobSchema = z.union([jobSchema, monitorJobSchema]);
export type AnyJob = Job | MonitorJob;

/** A full git commit (or tree) hash. */
const GIT_SHA = /^[0-9a-f]{40}([0-9a-f]{24})?$/;
const SHA256 = /^[0-9a-f]{64}$/;

/** A setting workers pull, at the exact commit the controller resolved (lock file, or the checkout's HEAD). */
export const manifestSettingSchema = z.object({
  name: z.string().min(1),
  /** The repository without credentials, as in ct.config.yml. */
  repo: z.string().min(1),
  commit: z.string().regex(GIT_SHA, 'not a full commit hash'),
  /** Only these environments are checked out; all when absent. */
  envs: z.array(z.string().min(1)).optional(),
  /**
   * A folder on the controller's machine, neither registered nor locked (`repo` is its path,
   * `commit` a hash of its content): read in place by `local:` workers, never fetched.
   */
  local_folder: z.literal(true).optional(),
  /**
   * The host powers of this setting's compose files that the controller's ct.config.yml trusted
   * for the selection (docs/security.md); workers refuse any other. None when absent.
   */
  trust: z.array(z.string().min(1)).optional(),
});
export type ManifestSetting = z.infer<typeof manifestSettingSchema>;

/** One `--extra-src` tree: unpacked on workers as `{name}/` and added as an import root. */
export const manifestExtraSrcSchema = z.object({
  /** The tree's basename (distinct across trees). */
  name: z.string().min(1),
  /** sha256 of its deterministic archive; the archive is the artifact `artifacts/{sha256}.tar.gz`. */
  sha256: z.string().regex(SHA256),
});

/** Everything a worker needs besides the job itself; written once per fleet. */
export const manifestSchema = z.object({
  version: z.literal(PROTOCOL_VERSION),
  /** What the fleet's jobs are: samples to run (`eval`, the default) or see `monitorManifestSchema`. */
  kind: z.literal('eval').optional(),
  fleet_id: z.string().min(1),
  created: z.string(),
  /** The run's task name (the task set, or the environments) and the log's eval spec inputs. */
  task_name: z.string().min(1),
  epochs: z.number().int().min(1),
  policy: z.object({ name: z.string().min(1), args: z.record(z.string(), z.string()) }),
  /** `--protocol`: the monitor and rule the policy's actions go through (absent: none). */
  protocol: protocolPlanSchema.optional(),
  /** The model the policy calls, for the log's eval.model. */
  model: z.string().optional(),
  /** Sample options (limits and timeouts) as the controller resolved them. */
  sample_options: sampleOptionsSchema,
  /** Samples a worker starts with (it adapts to its machine, up to fleet.max_concurrency, unless `concurrency_fixed`). */
  samples_per_worker: z.number().int().min(1),
  /** The user gave samples_per_worker (`--concurrency`, `--max-samples`): workers run exactly that many, never adapting. */
  concurrency_fixed: z.literal(true).optional(),
  /** Attempts of one job (failures reported, or silent deaths; hand-backs not counted) before it is dead-lettered (fleet.max_receive_count). */
  max_attempts: z.number().int().min(1).default(3),
  /** The code workers run: a commit (clean checkout) or tree SHA (dirty one), and its archive's key in the bucket. */
  code: z.object({ sha: z.string().regex(GIT_SHA), kind: z.enum(['commit', 'tree']), artifact_key: z.string().min(1) }).optional(),
  /** Settings workers pull before taking jobs, each at its pinned commit. */
  settings: z.array(manifestSettingSchema),
  /** `--extra-src` trees, in the order given. */
  extra_src: z.array(manifestExtraSrcSchema).default([]),
  sandbox: z.object({
    /** `docker`, or an external provider `module:export` loaded from the extra-src trees. */
    spec: z.string().min(1),
    /** `--worker-setup <basename>/<path>`: run as root after unpacking extra-src, before taking jobs. */
    worker_setup: z.object({ path: z.string().min(1), sha256: z.string().regex(SHA256) }).optional(),
    /** `--unsafe-local` was given: a `local` sandbox may run an agent other than the built-in `test` policy (workers check, as the controller did). */
    unsafe_local: z.literal(true).optional(),
  }),
  /** EC2 workers' instance type (absent for local and external workers). */
  instance_type: z.string().optional(),
  jobs: z.array(jobSchema).min(1),
});
export type Manifest = z.infer<typeof manifestSchema>;

/** One log a monitor fleet rates, as the controller found it. */
export const monitorInputSchema = z.object({
  /** The file name: the monitored copy gets the same one in the log dir. */
  name: z.string().min(1),
  /** The file on the controller's machine (recorded in the copy's header). */
  path: z.string().min(1),
  /** sha256 of the file's bytes. */
  sha256: z.string().regex(SHA256),
});
export type MonitorInput = z.infer<typeof monitorInputSchema>;

/**
 * A monitor pass on the fleet (`ct run monitor --fleet`): each job rates one sample of an
 * existing log with a trusted model. No settings, no sandbox: a worker reads the job's input
 * sample from the bucket, monitors it and stores the monitored one-sample log as its result.
 * Everything else (queues, ledger, attempts, results, done messages) is an eval fleet's.
 */
export const monitorManifestSchema = z.object({
  version: z.literal(PROTOCOL_VERSION),
  kind: z.literal('monitor'),
  fleet_id: z.string().min(1),
  created: z.string(),
  monitor: z.object({
    /** A built-in monitor or `module:export` (loaded from the working directory and `extra_src`). */
    name: z.string().min(1),
    /** The `-p` arguments as given to the controller (recorded in the copies' headers). */
    args: z.record(z.string(), z.string()),
    /**
     * Files arguments name (a prompt), shipped by content: a worker writes each to a folder of
     * its own and passes that path as the argument instead.
     */
    files: z.array(z.object({ arg: z.string().min(1), name: z.string().min(1), content: z.string() })).default([]),
    /** The model the monitor calls (`provider/model`), as the controller resolved it. */
    model: z.string().optional(),
  }),
  inputs: z.array(monitorInputSchema).min(1),
  /** Samples a worker monitors at once. */
  samples_per_worker: z.number().int().min(1),
  max_attempts: z.number().int().min(1).default(3),
  code: manifestSchema.shape.code,
  extra_src: z.array(manifestExtraSrcSchema).default([]),
  jobs: z.array(monitorJobSchema).min(1),
});
export type MonitorManifest = z.infer<typeof monitorManifestSchema>;

/** The manifest of a fleet of either kind. */
export type AnyManifest = Manifest | MonitorManifest;

/** Whether `m` is a monitor fleet's manifest. */
export function isMonitorManifest(m: AnyManifest): m is MonitorManifest {
  return m.kind === 'monitor';
}

/** Fails with both versions named when `raw` came from another protocol version. */
function checkVersion(raw: unknown, what: string): void {
  const v = raw && typeof raw === 'object' ? (raw as { version?: unknown }).version : undefined;
  if (v !== PROTOCOL_VERSION) {
    throw new ConfigError(
      `${what} was written with fleet protocol version ${JSON.stringify(v ?? null)}, but this ct speaks version ${PROTOCOL_VERSION}; ` +
        'run it with the ct that created it, or start a separate fleet with --new-fleet',
    );
  }
}

/** Parses a manifest's JSON; a ConfigError naming both versions when another protocol wrote it, or naming the bad field. */
export function parseManifest(json: string, fleetId: string): AnyManifest {
  let raw: unknown;
  try {
    raw = JSON.parse(json);
  } catch (e) {
    throw new ConfigError(`the manifest of fleet ${fleetId} is not JSON (${(e as Error).message})`);
  }
  checkVersion(raw, `the manifest of fleet ${fleetId}`);
  const schema = (raw as { kind?: unknown }).kind === 'monitor' ? monitorManifestSchema : manifestSchema;
  const r = schema.safeParse(raw);
  if (!r.success) throw new ConfigError(`the manifest of fleet ${fleetId} is invalid: ${r.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
  return r.data;
}

/**
 * Largest message body ct reads, in bytes (128 KiB). What ct writes stays far below it: a job,
 * MAX_HISTORY errors of MAX_HISTORY_ERROR characters and a dead reason come to at most about 75 KB
 * even when every character is escaped, so a larger body (SQS takes up to 256 KiB) is not ct's.
 */
export const MAX_MESSAGE_BYTES = 128 * 1024;

/** Parses a queue message body: the message, or why it cannot be run here (a worker moves such a message to the DLQ unrun). */
export function parseMessage<T>(schema: z.ZodType<T>, body: string): { message: T } | { problem: string } {
  const bytes = Buffer.byteLength(body, 'utf8');
  if (bytes > MAX_MESSAGE_BYTES) return { problem: `the message body is ${bytes} bytes, more than the ${MAX_MESSAGE_BYTES} a fleet message can be` };
  let raw: unknown;
  try {
    raw = JSON.parse(body);
  } catch {
    return { problem: 'the message body is not JSON' };
  }
  try {
    checkVersion(raw, 'this message');
  } catch (e) {
    return { problem: (e as Error).message };
  }
  const r = schema.safeParse(raw);
  return r.success ? { message: r.data } : { problem: `invalid message: ${r.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}` };
}

/** Errors a message carries from earlier attempts (the last ones; each cut to MAX_HISTORY_ERROR characters). */
export const MAX_HISTORY = 5;
export const MAX_HISTORY_ERROR = 2000;

/** One attempt of a job that ended without a result. */
export const attemptRecordSchema = z.object({
  attempt: z.number().int().min(1),
  worker: z.string(),
  error: z.string(),
});
export type AttemptRecord = z.infer<typeof attemptRecordSchema>;

/**
 * The work queue's message body (also what the dead-letter queue holds).
 *
 * Attempts are counted by ct, not by SQS: this delivery is attempt `attempts + receiveCount`.
 * A worker that hands a job back (it is stopping, a spot notice) queues a fresh message with the
 * attempts spent so far and deletes the old one, so a hand-back costs no attempt; a failure a
 * worker reports keeps the message (its next receive counts one more), and so does a worker
 * that died (its visibility ran out). SQS's own maxReceiveCount sits above ct's limit as a backstop.
 */
export const jobMessageSchema = z.strictObject({
  version: z.literal(PROTOCOL_VERSION),
  fleet_id: z.string().min(1),
  /** Strict: a field this protocol does not have means another writer, and the message is not run. */
  job: z.union([jobSchema.strict(), monitorJobSchema.strict()]),
  /** The controller's enqueue generation this message belongs to (see `QueueLedger`). */
  ticket: z.number().int().min(1),
  /** Attempts spent by earlier messages of this job (failed or died; hand-backs are not attempts). */
  attempts: z.number().int().min(0).default(0),
  /** The failures reported so far, oldest first (at most MAX_HISTORY). */
  history: z.array(attemptRecordSchema.strict()).max(MAX_HISTORY).default([]),
  /** Set when a worker moved the job to the dead-letter queue: why (its attempts are spent). */
  dead: z.strictObject({ reason: z.string(), attempts: z.number().int().min(0) }).optional(),
});
export type JobMessage = z.input<typeof jobMessageSchema>;
export type ParsedJobMessage = z.infer<typeof jobMessageSchema>;

/**
 * Why a job message cannot be a job of this fleet: another fleet's id, a job id the manifest does
 * not list, or a job whose fields differ from the manifest's job of that id (sample, epoch,
 * input, ...). Undefined when it matches. The manifest, not the message, says what a job is: a
 * message that disagrees with it was not written by this fleet's controller.
 */
export function jobMismatch(m: Pick<ParsedJobMessage, 'fleet_id' | 'job'>, manifest: AnyManifest): string | undefined {
  if (m.fleet_id !== manifest.fleet_id) return `a job of fleet ${short(m.fleet_id)}, not ${manifest.fleet_id}`;
  const want = (manifest.jobs as AnyJob[]).find((j) => j.job_id === m.job.job_id);
  if (!want) return `job ${short(m.job.job_id)} is not in the fleet's manifest`;
  const keys = new Set([...Object.keys(want), ...Object.keys(m.job)]);
  const differ = [...keys].filter((k) => (want as Record<string, unknown>)[k] !== (m.job as Record<string, unknown>)[k]);
  if (differ.length === 0) return undefined;
  const val = (v: unknown) => (v === undefined ? 'none' : short(JSON.stringify(v)));
  return `job ${m.job.job_id} differs from the manifest's job of that id (${differ
    .map((k) => `${k}: ${val((m.job as Record<string, unknown>)[k])}, manifest ${val((want as Record<string, unknown>)[k])}`)
    .join('; ')})`;
}

/** A value from a message, cut for a reason line. */
function short(s: string): string {
  return s.length > 80 ? `${s.slice(0, 80)}...` : s;
}

/** Characters of a refused message's body its dead-letter record keeps. */
export const REJECTED_EXCERPT_CHARS = 500;

/**
 * What a worker puts on the dead-letter queue for a work message it refused to run (not JSON,
 * another protocol version, unknown fields, too large, not a job of this fleet's manifest): the
 * reason and the first characters of the body, never the body itself (it may be near SQS's limit).
 */
export const rejectedMessageSchema = z.strictObject({
  version: z.literal(PROTOCOL_VERSION),
  fleet_id: z.string().min(1),
  rejected: z.strictObject({
    reason: z.string(),
    /** The refused message's SQS id. */
    message_id: z.string(),
    /** The worker that refused it. */
    worker: z.string(),
    /** The job id the body named, when it named one. */
    job_id: z.string().optional(),
    /** The body's size in bytes, and its first REJECTED_EXCERPT_CHARS characters. */
    bytes: z.number().int().min(0),
    excerpt: z.string(),
  }),
});
export type RejectedMessage = z.infer<typeof rejectedMessageSchema>;

/**
 * What the controllers of a fleet queued, at `{fleet_id}/queue-ledger.json`. A controller writes
 * it as `enqueueing` before it sends any message and as `queued` once every message is sent; a
 * resume trusts a `queued` ledger of the same work queue (its creation time) and sends nothing
 * for jobs without a result: they have a message, visible, in flight or dead-lettered. Any
 * other state means messages may be missing, so the resume queues every unfinished job again
 * under a new generation, and workers drop messages of older generations without running them.
 *
 * A message with ticket `t` for job `j` is current when `t >= (requeued[j] ?? base)`.
 */
export const queueLedgerSchema = z.object({
  version: z.literal(PROTOCOL_VERSION),
  fleet_id: z.string().min(1),
  /** The newest generation any controller used. */
  generation: z.number().int().min(1),
  /** The generation of the last enqueue of every unfinished job. */
  base: z.number().int().min(1),
  /** Jobs queued on their own since `base` (retried errors), with their generation. */
  requeued: z.record(z.string(), z.number().int().min(1)).default({}),
  state: z.enum(['enqueueing', 'queued']),
  /** The work queue these messages are on (its creation time): a re-created queue holds none of them. */
  queue_id: z.string(),
  updated: z.string(),
});
export type QueueLedger = z.infer<typeof queueLedgerSchema>;

/** The queue ledger's JSON; a ConfigError when another protocol wrote it or it is damaged. */
export function parseLedger(bytes: Uint8Array, fleetId: string): QueueLedger {
  let raw: unknown;
  try {
    raw = JSON.parse(Buffer.from(bytes).toString('utf8'));
  } catch (e) {
    throw new ConfigError(`the queue ledger of fleet ${fleetId} is not JSON (${(e as Error).message}); start a separate fleet with --new-fleet`);
  }
  const r = queueLedgerSchema.safeParse(raw);
  if (!r.success) throw new ConfigError(`the queue ledger of fleet ${fleetId} is invalid (${r.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}); start a separate fleet with --new-fleet`);
  return r.data;
}

/** Whether a message with `ticket` for `jobId` belongs to the current generation of `ledger` (no ledger: every message does). */
export function ticketIsCurrent(ledger: QueueLedger | undefined, jobId: string, ticket: number): boolean {
  if (!ledger) return true;
  return ticket >= (ledger.requeued[jobId] ?? ledger.base);
}

/** What `{fleet_id}/errors/{kind}/{job_id}.json` holds: the job's stored result is an error. */
export const errorMarkerSchema = z.object({
  job_id: z.string().min(1),
  /** `dead`: no worker produced a result (attempts spent); `sample`: the sample ended in error. */
  kind: z.enum(['dead', 'sample']),
  error: z.string(),
});
export type ErrorMarker = z.infer<typeof errorMarkerSchema>;

/** A done message about a job: its result is in S3, or the attempt failed, was handed back or dropped. */
export const jobDoneMessageSchema = z.object({
  version: z.literal(PROTOCOL_VERSION),
  fleet_id: z.string().min(1),
  job_id: z.string().min(1),
  /**
   * `ok`: the sample ran (it may still have a sample error, recorded in its log); `error`: no
   * result this attempt; `handed_back`: queued again as a fresh message without spending an
   * attempt (`reason`: the worker was stopping, or its spot instance is being reclaimed);
   * `dead`: its attempts are spent, moved to the dead-letter queue; `superseded`: a message of an
   * older generation, dropped unrun.
   */
  status: z.enum(['ok', 'error', 'handed_back', 'dead', 'superseded']),
  reason: z.string().optional(),
  /** The result's S3 key when status is ok. */
  key: z.string().optional(),
  error: z.string().optional(),
  /** The attempt this delivery was (ct's count: earlier attempts + SQS's receive count). */
  attempt: z.number().int().min(1),
  /** The worker that ran it (instance id, or host name off EC2). */
  worker: z.string(),
  seconds: z.number().min(0),
});
export type JobDoneMessage = z.infer<typeof jobDoneMessageSchema>;

/** Why a worker's concurrency changed (`start`: the value it started with). */
export const CONCURRENCY_REASONS = ['start', 'clean_finish', 'sandbox_start_failed', 'oom_killed', 'memory_pressure'] as const;

/**
 * A done message about the worker itself (`concurrency`): how many samples it runs at once
 * changed (or, `start`, what it started with), and why. The controller records it in the
 * fleet's events.jsonl and sizes its growth by the workers' latest values.
 */
export const concurrencyReportSchema = z.object({
  version: z.literal(PROTOCOL_VERSION),
  fleet_id: z.string().min(1),
  status: z.literal('concurrency'),
  worker: z.string(),
  concurrency: z.object({
    from: z.number().int().min(1),
    to: z.number().int().min(1),
    reason: z.enum(CONCURRENCY_REASONS),
    /** What the worker measured (memory, load), one line. */
    detail: z.string().max(500).optional(),
  }),
});
export type ConcurrencyReport = z.infer<typeof concurrencyReportSchema>;

/** The done queue's message body: about a job (`jobDoneMessageSchema`) or about the worker (`concurrencyReportSchema`). */
export const doneMessageSchema = z.discriminatedUnion('status', [jobDoneMessageSchema, concurrencyReportSchema]);
export type DoneMessage = JobDoneMessage | ConcurrencyReport;

/** The object key of a code or extra-src artifact. */
export function artifactKey(sha: string): string {
  return `artifacts/${sha}.tar.gz`;
}

/** Queue and object names of one fleet. */
export interface FleetNames {
  workQueue: string;
  doneQueue: string;
  deadLetterQueue: string;
  manifestKey: string;
  ledgerKey: string;
  errorPrefix: string;
  errorKey(kind: ErrorMarker['kind'], jobId: string): string;
  resultKey(jobId: string): string;
  resultPrefix: string;
  /** A monitor fleet's input sample of a job (a one-sample log the controller uploads). */
  inputKey(jobId: string): string;
  inputPrefix: string;
  logPrefix: string;
  logKey(worker: string, name: string): string;
}

/** SQS queue names are at most 80 characters of [A-Za-z0-9_-]. */
const QUEUE_NAME = /^[A-Za-z0-9_-]{1,80}$/;

export function fleetNames(fleetId: string, queuePrefix: string): FleetNames {
  const names = {
    workQueue: `${queuePrefix}${fleetId}-work`,
    doneQueue: `${queuePrefix}${fleetId}-done`,
    deadLetterQueue: `${queuePrefix}${fleetId}-dlq`,
  };
  for (const q of Object.values(names)) {
    if (!QUEUE_NAME.test(q)) throw new Error(`queue name ${q} is not a valid SQS name (at most 80 of A-Z a-z 0-9 _ -)`);
  }
  return {
    ...names,
    manifestKey: `${fleetId}/manifest.json`,
    ledgerKey: `${fleetId}/queue-ledger.json`,
    errorPrefix: `${fleetId}/errors/`,
    errorKey: (kind, jobId) => `${fleetId}/errors/${kind}/${jobId}.json`,
    resultPrefix: `${fleetId}/`,
    resultKey: (jobId) => `${fleetId}/${jobId}.eval`,
    inputPrefix: `${fleetId}/inputs/`,
    inputKey: (jobId) => `${fleetId}/inputs/${jobId}.eval`,
    logPrefix: `${fleetId}/logs/`,
    logKey: (worker, name) => `${fleetId}/logs/${worker}-${name}`,
  };
}

/** The job id a result key names, or undefined for other objects under the fleet's prefix. */
export function jobIdOfKey(fleetId: string, key: string): string | undefined {
  const m = key.startsWith(`${fleetId}/`) ? /^([A-Za-z0-9._-]+)\.eval$/.exec(key.slice(fleetId.length + 1)) : null;
  return m?.[1];
}

/** The kind and job of an error marker's key, or undefined for other keys. */
export function errorMarkerOfKey(fleetId: string, key: string): { kind: ErrorMarker['kind']; jobId: string } | undefined {
  const m = key.startsWith(`${fleetId}/errors/`) ? /^(dead|sample)\/([A-Za-z0-9._-]+)\.json$/.exec(key.slice(fleetId.length + 8)) : null;
  return m ? { kind: m[1] as ErrorMarker['kind'], jobId: m[2]! } : undefined;
}

/** The fleet and role a queue name belongs to (the inverse of `fleetNames`), or undefined for any other queue. */
export function fleetOfQueue(name: string, queuePrefix: string): { fleetId: string; role: 'work' | 'done' | 'dlq' } | undefined {
  const dash = name.lastIndexOf('-');
  if (!name.startsWith(queuePrefix) || dash <= queuePrefix.length) return undefined;
  const fleetId = name.slice(queuePrefix.length, dash);
  let names: FleetNames;
  try {
    names = fleetNames(fleetId, queuePrefix);
  } catch {
    return undefined;
  }
  const role = name === names.workQueue ? 'work' : name === names.doneQueue ? 'done' : name === names.deadLetterQueue ? 'dlq' : undefined;
  return role ? { fleetId, role } : undefined;
}
