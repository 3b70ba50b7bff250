/**
 * A monitor pass on the fleet (`ct run monitor --fleet`), the controller's side: one job per
 * sample-epoch of the input logs, the inputs uploaded as one-sample logs for workers anywhere to
 * read, and the results merged back into a monitored copy of each input (same file name in the
 * output folder) with the header and results a local pass writes (`monitor-log.ts`).
 *
 * The fleet id hashes the monitor, its arguments, the model it calls, the files its arguments
 * name (a prompt), the input logs' content and the code: the same command over the same logs
 * resumes the same fleet; a changed prompt or log is another fleet.
 *
 * A sample whose monitoring failed on every attempt (dead-lettered) is copied unmonitored and
 * counted (`MergedRow.dead`), so the copy still has every sample of its input.
 */
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { mkdir, rename, rm } from 'node:fs/promises';
import { basename, join, resolve } from 'node:path';
import { ConfigError } from '../errors.js';
import type { FleetResults } from '../fleet/controller.js';
import { canonicalJson } from '../fleet/fleet-id.js';
import type { MergedRow, MergeOutcome } from '../fleet/merge-results.js';
import { oneSampleLog } from '../fleet/one-sample-log.js';
import { PROTOCOL_VERSION, type MonitorJob, type MonitorManifest } from '../fleet/protocol.js';
import type { PackedExtraSrc } from '../fleet/extra-src.js';
import type { ResultStore } from '../fleet/types.js';
import { mergeEvalLogs } from '../log/eval-merge.js';
import { readEvalLog, readSampleFrom, sampleEntriesOf } from '../log/eval-reader.js';
import type { EvalStatus } from '../log/types.js';
import { withZipReader } from '../log/zip-reader.js';
import { artifactKey, type CodeSnapshot } from '../fleet/code-artifact.js';
import { extraSrcHash } from '../fleet/extra-src.js';
import { FLEET_ID_LENGTH } from '../fleet/fleet-id.js';
import type { Monitor } from './monitor-types.js';
import { MAX_SUSPICION, TRAJECTORY_SUSPICION } from './scores.js';
import { SuspicionResults, monitoredSpec, type MonitorRecord } from './monitor-log.js';

/** Bumped when the hashed fields change meaning. */
const SCHEME = 'ct-monitor-fleet-id/1';

export interface MonitorFleetInput {
  /** The input logs (absolute paths, distinct file names). */
  logs: readonly string[];
  /** `--monitor` as given. */
  monitorName: string;
  /** The monitor, built here (its model resolved). */
  monitor: Monitor;
  /** `-p` arguments as given. */
  args: Record<string, string>;
  perWorker: number;
  maxAttempts: number;
  code: CodeSnapshot;
  extraSrc: readonly PackedExtraSrc[];
  /** Relative paths in arguments are from here. */
  cwd: string;
}

/** A stable job id: readable (the sample id and epoch), unique (a hash of the input's content, the sample and the epoch). */
export function monitorJobId(inputSha256: string, sampleId: string | number, epoch: number): string {
  const h = createHash('sha256').update(canonicalJson({ input: inputSha256, sample: String(sampleId), epoch })).digest('hex').slice(0, 12);
  const readable = String(sampleId).replace(/[^A-Za-z0-9._-]+/g, '.').slice(0, 120);
  return `${readable}.e${epoch}.${h}`;
}

/** The manifest of the monitor fleet these inputs describe, and its id. */
export async function buildMonitorManifest(o: MonitorFleetInput): Promise<{ manifest: MonitorManifest; fleetId: string }> {
  const inputs = o.logs.map((path) => ({ name: basename(path), path, sha256: createHash('sha256').update(readFileSync(path)).digest('hex') }));
  const jobs: MonitorJob[] = [];
  for (const [index, input] of inputs.entries()) {
    const entries = await withZipReader(input.path, async (zip) => sampleEntriesOf(zip));
    for (const e of entries) jobs.push({ job_id: monitorJobId(input.sha256, e.id, e.epoch), sample_id: e.id, epoch: e.epoch, input: index });
  }
  if (jobs.length === 0) throw new ConfigError(`no samples in ${o.logs.join(', ')}: nothing to monitor`);
  // Arguments naming files (a prompt) travel by content: workers elsewhere do not have them.
  const files = Object.entries(o.args)
    .filter(([, v]) => v !== '' && existsSync(resolve(o.cwd, v)) && statSync(resolve(o.cwd, v)).isFile())
    .map(([arg, v]) => ({ arg, name: basename(v), content: readFileSync(resolve(o.cwd, v), 'utf8') }));
  const xs = extraSrcHash(o.extraSrc);
  const id = createHash('sha256')
    .update(
      canonicalJson({
        scheme: SCHEME,
        protocol: PROTOCOL_VERSION,
        codeSha: o.code.sha,
        monitor: o.monitorName,
        args: o.args,
        model: o.monitor.model,
        files: files.map((f) => ({ arg: f.arg, sha256: createHash('sha256').update(f.content).digest('hex') })),
        inputs: inputs.map((i) => i.sha256).sort(),
        extraSrc: xs,
      }),
    )
    .digest('hex')
    .slice(0, FLEET_ID_LENGTH);
  const manifest: MonitorManifest = {
    version: PROTOCOL_VERSION,
    kind: 'monitor',
    fleet_id: id,
    created: new Date().toISOString(),
    monitor: { name: o.monitorName, args: o.args, files, ...(o.monitor.model ? { model: o.monitor.model } : {}) },
    inputs,
    samples_per_worker: o.perWorker,
    max_attempts: o.maxAttempts,
    code: { sha: o.code.sha, kind: o.code.kind, artifact_key: artifactKey(o.code.sha) },
    extra_src: o.extraSrc.map((p) => ({ name: p.name, sha256: p.sha256 })),
    jobs,
  };
  return { manifest, fleetId: id };
}

/** Uploads each job's input sample as a one-sample log (with its log's header); those already there are skipped. */
export async function uploadMonitorInputs(store: ResultStore, manifest: MonitorManifest, note: (line: string) => void): Promise<void> {
  const have = await store.listInputIds();
  const missing = manifest.jobs.filter((j) => !have.has(j.job_id));
  if (missing.length === 0) return;
  note(`uploading ${missing.length} input sample(s)${have.size ? ` (${have.size} already there)` : ''}`);
  for (const [index, input] of manifest.inputs.entries()) {
    const jobs = missing.filter((j) => j.input === index);
    if (jobs.length === 0) continue;
    const header = await readEvalLog(input.path, { headerOnly: true });
    const byKey = new Map(jobs.map((j) => [`${j.sample_id}\u0000${j.epoch}`, j]));
    await withZipReader(input.path, async (zip) => {
      for (const e of sampleEntriesOf(zip)) {
        const job = byKey.get(`${e.id}\u0000${e.epoch}`);
        if (!job) continue;
        const sample = await readSampleFrom(zip, e.name);
        await store.putInput(job.job_id, await oneSampleLog(sample, { spec: header.eval, plan: header.plan }));
      }
    });
  }
}

export interface MonitorFleetResultsOptions {
  store: ResultStore;
  manifest: MonitorManifest;
  monitor: Monitor;
  /** Where the monitored copies go. */
  outDir: string;
  version: string;
}

/** A monitor fleet's results: a dead job's result is its input sample, unmonitored; the merge writes a monitored copy per input. */
export function monitorFleetResults(o: MonitorFleetResultsOptions): FleetResults {
  return {
    deadResult: async (d) => {
      const bytes = await o.store.getInput(d.job.job_id);
      if (!bytes) throw new Error(`the input of job ${d.job.job_id} is missing from the bucket`);
      return bytes;
    },
    merge: () => mergeMonitored(o),
  };
}

async function mergeMonitored(o: MonitorFleetResultsOptions): Promise<MergeOutcome> {
  const { store, manifest, monitor } = o;
  const dead = new Set((await store.listErrorMarkers()).filter((m) => m.kind === 'dead').map((m) => m.jobId));
  const rows: MergedRow[] = [];
  const missing: string[] = [];
  const paths: string[] = [];
  let worst: EvalStatus = 'success';
  let first: MergeOutcome['header'] | undefined;
  const score = monitor.level === 'action' ? MAX_SUSPICION : TRAJECTORY_SUSPICION;
  await mkdir(o.outDir, { recursive: true });
  for (const [index, input] of manifest.inputs.entries()) {
    const jobs = manifest.jobs.filter((j) => j.input === index);
    const header = await readEvalLog(input.path, { headerOnly: true });
    const record: MonitorRecord = {
      name: monitor.name,
      level: monitor.level,
      ...(monitor.model ? { model: monitor.model } : {}),
      args: manifest.monitor.args,
      score,
      monitored_at: new Date().toISOString(),
      input: input.path,
      version: o.version,
    };
    const suspicion = new SuspicionResults();
    const inputJobs: MonitorJob[] = [];
    let skipped = 0;
    async function* results(): AsyncGenerator<Buffer> {
      for (const job of jobs) {
        const bytes = await store.getResult(job.job_id);
        if (!bytes) {
          missing.push(job.job_id);
          continue;
        }
        inputJobs.push(job);
        yield Buffer.from(bytes);
      }
    }
    const temp = `.${input.name}.${process.pid}-${randomBytes(4).toString('hex')}.partial`;
    let merged;
    try {
      merged = await mergeEvalLogs({
        logDir: o.outDir,
        fileName: temp,
        spec: monitoredSpec(header.eval, record),
        plan: header.plan,
        inputs: results(),
        status: header.status === 'started' ? 'error' : header.status,
        stats: header.stats,
        checkpointSeconds: 24 * 3600,
        onSample: (summary, i) => {
          const job = inputJobs[i]!;
          if (String(summary.id) !== job.sample_id || summary.epoch !== job.epoch) return false;
          suspicion.add(summary);
          if (summary.error) skipped++;
          const value = summary.scores?.[score]?.value;
          rows.push({
            jobId: job.job_id,
            id: String(summary.id),
            epoch: summary.epoch,
            ...(value !== undefined ? { scores: { [score]: String(value) } } : {}),
            ...(dead.has(job.job_id) ? { error: 'monitoring failed on every attempt: copied unmonitored', dead: { attempts: manifest.max_attempts, workers: [] } } : {}),
            seconds: summary.total_time ?? 0,
          });
          return true;
        },
        outcome: () => {
          const r = suspicion.results(header, jobs.length, skipped);
          return {
            status: header.status === 'started' ? 'error' : header.status,
            ...(header.error ? { error: header.error } : {}),
            results: r.results,
            reductions: r.reductions,
            ...(header.invalidated !== undefined ? { invalidated: header.invalidated } : {}),
          };
        },
      });
      const path = join(o.outDir, input.name);
      await rename(merged.path, path);
      paths.push(path);
      first ??= merged.header;
      if (merged.header.status !== 'success') worst = merged.header.status;
    } catch (e) {
      await rm(join(o.outDir, temp), { force: true });
      throw e;
    }
  }
  if (missing.length) worst = 'error';
  return { path: paths[0]!, paths, status: worst, header: first!, rows, missing };
}
