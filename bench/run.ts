/**
 * `npm run bench`: ct against Inspect AI and the raw docker floor, side by side in one run.
 *   latency     one sample, N tool calls (echo / file write / file read / 1 MiB output),
 *               one-service and three-service (healthcheck) environments;
 *   throughput  S samples × 20 calls at concurrency 1, 4, 8: samples/min and CPU seconds;
 *   remote      exec latency over SSH (loopback sshd): ct's SSH sandbox vs `ssh host docker exec`;
 *   sandbox API bench/sandbox-overhead.js, folded in;
 *   scale       a run's cost against its size: 100 / 1,000 / 10,000 / 100,000 samples of
 *               `--sandbox local --policy test` (per-sample CPU, its ratio to 100 samples, peak
 *               RSS, log size) beside Inspect (mockllm, no sandbox) up to 1,000 samples; and a
 *               merge of 10,000 one-sample logs into one (time, peak RSS).
 * Prints one markdown table (median [min–max] over repetitions, ratios ct/Inspect and ct/raw)
 * with the configuration that produced it; writes the raw numbers (JSON) and an SVG chart.
 *
 * Usage: node dist/bench/run.js [--quick] [--out-dir DIR] [--sections a,b] [--reps N]
 *          [--throughput-samples S] [--throughput-reps N] [--raw-throughput] [--keep]
 * Full run (defaults): 5 repetitions of latency (N = 1, 20, 100) and remote, 1 run of
 * throughput (40 samples per concurrency and system), ~30-35 min on 2 cores, plus the scale
 * section (the 100,000-sample run alone takes ~10-20 min). --quick: scale at 100 and 300
 * samples (Inspect at 100) and a merge of 300 logs;
 * 1 repetition, N = 1 and 20, 4 samples for throughput, 5-9 min (seven `inspect eval` processes
 * at ~15 s of start-up each set the floor); CI runs it (test/bench/bench-quick.test.ts).
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { availableParallelism, totalmem } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { INSPECT_MIN_ENGINE, REPO_ROOT, inspectEngineOverride, inspectSubprocesses } from './orchestrators.js';
import { renderChart, type Panel } from './svg-chart.js';
import { SYSTEMS, renderTable, type Row } from './report.js';
import { latencySection, type LatencyProcess, type LatencySample } from './section-latency.js';
import { remoteSection } from './section-remote.js';
import { sandboxApiSection } from './section-sandbox-api.js';
import { scaleSection, type MergeRun, type ScaleRun } from './section-scale.js';
import { throughputSection, type ThroughputRun } from './section-throughput.js';
import { spread } from './stats.js';
import { targetLines } from './targets.js';
import { BIG_OUTPUT_BYTES } from './trajectory.js';
import { createWorkspace } from './workspace.js';

const SECTIONS = ['latency', 'throughput', 'remote', 'sandbox-api', 'scale'] as const;

class UsageError extends Error {}
type Section = (typeof SECTIONS)[number];

export interface BenchPlan {
  quick: boolean;
  sections: Section[];
  latencyNs: number[];
  reps: number;
  throughput: { concurrency: number[]; samples: number; calls: number; reps: number; raw: boolean };
  remote: { calls: number; reps: number };
  scale: { sizes: number[]; inspectMax: number; mergeInputs: number };
}

function plan(argv: string[]): { plan: BenchPlan; outDir: string; keep: boolean } {
  const { values } = parseArgs({
    args: argv,
    options: {
      quick: { type: 'boolean', default: false },
      'out-dir': { type: 'string' },
      sections: { type: 'string' },
      reps: { type: 'string' },
      'throughput-samples': { type: 'string' },
      'throughput-reps': { type: 'string' },
      'raw-throughput': { type: 'boolean', default: false },
      keep: { type: 'boolean', default: false },
    },
    strict: true,
  });
  const quick = values.quick!;
  const int = (v: string | undefined, d: number, name: string) => {
    if (v === undefined) return d;
    const n = Number(v);
    if (!Number.isInteger(n) || n < 1) throw new UsageError(`--${name} needs a whole number >= 1, got ${v}`);
    return n;
  };
  const sections = values.sections ? (values.sections.split(',') as Section[]) : [...SECTIONS];
  for (const s of sections) if (!SECTIONS.includes(s)) throw new UsageError(`unknown section ${s}; sections: ${SECTIONS.join(', ')}`);
  const reps = int(values.reps, quick ? 1 : 5, 'reps');
  return {
    plan: {
      quick,
      sections,
      latencyNs: quick ? [1, 20] : [1, 20, 100],
      reps,
      throughput: {
        concurrency: [1, 4, 8],
        samples: int(values['throughput-samples'], quick ? 4 : 40, 'throughput-samples'),
        calls: 20,
        reps: int(values['throughput-reps'], 1, 'throughput-reps'),
        raw: values['raw-throughput']!,
      },
      remote: { calls: 10, reps },
      // --quick stays short for CI (it checks the bench works, not the figures): 300 samples at most, Inspect at 100 only.
      scale: quick ? { sizes: [100, 300], inspectMax: 100, mergeInputs: 300 } : { sizes: [100, 1000, 10_000, 100_000], inspectMax: 1000, mergeInputs: 10_000 },
    },
    outDir: values['out-dir'] ?? join(REPO_ROOT, 'bench', 'results'),
    keep: values.keep!,
  };
}

function version(cmd: string, args: string[]): string {
  try {
    return execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim().split('\n')[0]!;
  } catch {
    return 'not available';
  }
}

/** Fails early, with what to do, when the machine lacks what the bench drives. */
function preflight(): void {
  if (version('docker', ['version', '--format', '{{.Server.Version}}']) === 'not available') throw new Error('Docker Engine is not answering (`docker version`)');
  for (const image of ['debian:bookworm-slim', 'busybox:latest']) {
    if (version('docker', ['image', 'inspect', '--format', '{{.Id}}', image]) === 'not available') {
      throw new Error(`image ${image} is missing; build it with scripts/build-images.sh`);
    }
  }
  if (version('python3', ['-c', 'import inspect_ai; print(inspect_ai.__version__)']) === 'not available') {
    throw new Error('python3 cannot import inspect_ai (pip install inspect-ai)');
  }
}

function configuration(p: BenchPlan): string[] {
  const channel = existsSync(join(REPO_ROOT, 'dist', 'src', 'sandbox', 'exec-channel'))
    ? 'persistent exec channel (default on)'
    : 'a `docker exec` per call (no exec channel in this build)';
  const override = inspectEngineOverride();
  return [
    `- machine: ${availableParallelism()} CPUs, ${(totalmem() / 2 ** 30).toFixed(0)} GiB; Docker Engine ${version('docker', ['version', '--format', '{{.Server.Version}}'])}; ${version('docker', ['compose', 'version'])}; Node ${process.version}; inspect_ai ${version('python3', ['-c', 'import inspect_ai; print(inspect_ai.__version__)'])}`,
    `- ct: \`ct run eval --policy replay --quiet --json\` (bin/ct.js), ${channel}; Inspect: \`inspect eval\` of a generated task (one Sample, sandbox=("docker", compose.yml), a solver replaying the calls via sandbox().exec/write_file/read_file, a scorer running a script in the sandbox), \`--model mockllm/model --display none --no-log-images --no-log-realtime --max-samples C --max-sandboxes C --max-subprocesses max(CPUs, 2C)\`${override ? `; Inspect's Engine >= ${INSPECT_MIN_ENGINE} prerequisite relaxed to ${override} (this machine's)` : ''}; raw: docker CLI from the bench process (\`docker run -d\` / \`docker compose up --wait\`, \`docker exec\`, \`docker rm -f\` / \`docker compose down\`)`,
    `- trajectory: calls cycle echo, file write (~1 KB), read of that file, echo, ${BIG_OUTPUT_BYTES / 1024} KiB output; ct uses bash and text_editor create/view, Inspect exec/write_file/read_file, raw \`docker exec\` (write via stdin)`,
    `- latency: N = ${p.latencyNs.join(', ')}; ${p.reps} repetition(s) = ${p.reps} samples run one after another (ct and Inspect: one eval of ${p.reps} epochs at concurrency 1 per configuration; raw: ${p.reps} samples), systems in rotating order; cells are median [min–max] over the samples of each sample's figure; init/cleanup from ct's log events (sample_init -> first tool call; score -> sample completed) and Inspect's sandbox sample_init/sample_cleanup, timed by the task file; start-up/wind-down rows are per process, over the ${p.latencyNs.length * 2} processes of each orchestrator`,
    `- throughput: ${p.throughput.samples} samples (epochs) × ${p.throughput.calls} calls, 1 service, concurrency ${p.throughput.concurrency.join('/')}, ${p.throughput.reps} run(s) per cell${p.throughput.reps === 1 ? ' (one run each: Inspect alone needs ~7 min for 40 samples at concurrency 1 here, so repetitions do not fit the ~30 min budget; --throughput-reps N adds them)' : ''}; samples/min over the whole process (start to exit); CPU = user+sys of the orchestrator's process tree (wait4 accounting via /proc/self/stat cutime+cstime); Engine CPU = dockerd+containerd meanwhile (a shared Engine: it counts any other client's load too)${p.throughput.raw ? '; raw = this process + its docker CLIs' : '; raw floor not run (--raw-throughput)'}`,
    `- remote: ${p.remote.calls} echo calls per repetition, ${p.remote.reps} repetition(s)`,
    `- scale: \`ct run eval --sandbox local --policy test --task-file demo --epochs N/4 --max-samples 8\` at N = ${p.scale.sizes.join(', ')}; per-sample CPU = the ct process's own user+sys (its scorer/setup children excluded) / N; Inspect: a generated task of N samples, \`--model mockllm/model --max-samples 8\`, no sandbox, CPU and peak RSS from /usr/bin/time, run up to ${p.scale.inspectMax} samples; merge: ${p.scale.mergeInputs} one-sample logs written by ct's writer, merged in a separate process`,
  ];
}

function chartPanels(rows: Row[]): Panel[] {
  const colors = { ct: '#1f77b4', inspect: '#ff7f0e', raw: '#7f7f7f' } as const;
  const names = { ct: 'ct', inspect: 'Inspect', raw: 'raw docker' } as const;
  const pick = (section: string, metric: string, title: string, short: (config: string) => string): Panel | undefined => {
    const rs = rows.filter((r) => r.section === section && r.metric === metric && SYSTEMS.some((s) => r.values[s]?.length));
    if (rs.length === 0) return undefined;
    return {
      title,
      groups: rs.map((r) => short(r.config)),
      series: SYSTEMS.map((s) => ({
        name: names[s],
        color: colors[s],
        bars: rs.map((r) => (r.values[s]?.length ? spread(r.values[s]!) : undefined)),
      })),
    };
  };
  const shortLatency = (c: string) => c.replace('3 services + healthcheck', '3 svc').replace('1 service', '1 svc');
  const shortTp = (c: string) => c.replace(/.*concurrency (\d+)$/, 'concurrency $1');
  return [
    pick('latency', 'exec (`echo`) median, ms', 'Exec (echo) per call, ms', shortLatency),
    pick('latency', 'per-call p95, ms', 'Per-call p95 (all calls), ms', shortLatency),
    pick('latency', 'sandbox init + cleanup, s', 'Sandbox init + cleanup per sample, s', shortLatency),
    pick('latency', 'sample wall (sandbox init to cleanup end), s', 'Sample wall time, s', shortLatency),
    pick('throughput', 'samples per minute', 'Throughput, samples per minute', shortTp),
    pick('throughput', 'orchestrator CPU (user+sys), s', 'Orchestrator CPU seconds per run', shortTp),
    pick('remote (SSH)', 'exec (`echo`) median, ms', 'Exec over SSH, ms (raw = ssh per call)', () => 'loopback sshd'),
    pick('scale', 'orchestrator CPU per sample, ms', 'Orchestrator CPU per sample by run size, ms', (c) => c.replace(/ samples.*/, '')),
  ].filter((p): p is Panel => p !== undefined);
}

async function main(): Promise<void> {
  const { plan: p, outDir, keep } = plan(process.argv.slice(2));
  preflight();
  const started = performance.now();
  const log = (line: string) => process.stderr.write(`${line}\n`);
  const ws = createWorkspace();
  log(`bench workspace: ${ws.dir}`);
  const rows: Row[] = [];
  const notes: string[] = [];
  const raw: {
    latency?: { samples: LatencySample[]; processes: LatencyProcess[] };
    throughput?: ThroughputRun[];
    scale?: { runs: ScaleRun[]; merge: MergeRun };
  } = {};
  const timings: Record<string, number> = {};
  try {
    for (const section of p.sections) {
      const t = performance.now();
      log(`section ${section}...`);
      if (section === 'latency') {
        const r = await latencySection(ws, { ns: p.latencyNs, reps: p.reps, log });
        rows.push(...r.rows);
        raw.latency = { samples: r.samples, processes: r.processes };
      } else if (section === 'throughput') {
        const r = await throughputSection(ws, { ...p.throughput, log });
        rows.push(...r.rows);
        raw.throughput = r.runs;
      } else if (section === 'remote') {
        const r = await remoteSection(ws, { ...p.remote, log });
        rows.push(...r.rows);
        if (r.note) notes.push(r.note);
      } else if (section === 'scale') {
        const r = await scaleSection(ws, { ...p.scale, log });
        rows.push(...r.rows);
        raw.scale = { runs: r.runs, merge: r.merge };
      } else {
        const r = await sandboxApiSection(p.quick);
        rows.push(...r.rows);
      }
      timings[section] = (performance.now() - t) / 1000;
      log(`section ${section}: ${timings[section]!.toFixed(0)} s`);
    }
  } finally {
    if (!keep) ws.remove();
  }
  const totalS = (performance.now() - started) / 1000;
  const config = configuration(p);
  const targets = targetLines(rows);
  const out = [
    `# ct bench${p.quick ? ' (--quick)' : ''}`,
    '',
    ...config,
    `- sections: ${Object.entries(timings).map(([k, v]) => `${k} ${v.toFixed(0)} s`).join(', ')}; total ${(totalS / 60).toFixed(1)} min`,
    '',
    renderTable(rows),
    '',
    'Targets (reported, not asserted):',
    ...targets,
    ...(notes.length ? ['', 'Notes:', ...notes.map((n) => `- ${n}`)] : []),
  ];
  process.stdout.write(`${out.join('\n')}\n`);
  mkdirSync(outDir, { recursive: true });
  const stem = p.quick ? 'bench-quick' : 'bench';
  const stamp = new Date().toISOString().replace(/[:.]/g, '-');
  const jsonFile = join(outDir, `${stem}-${stamp}.json`);
  writeFileSync(jsonFile, JSON.stringify({ plan: p, configuration: config, inspectSubprocesses: p.throughput.concurrency.map(inspectSubprocesses), timings, totalS, rows, targets, notes, runs: raw }, null, 2));
  const svg = join(outDir, `${stem}.svg`);
  writeFileSync(svg, renderChart(`ct vs Inspect vs raw docker${p.quick ? ' (quick)' : ''}: median, whiskers min-max`, chartPanels(rows)));
  log(`wrote ${jsonFile} and ${svg}`);
}

main().catch((e) => {
  // Bad flags are usage errors (exit 2, no stack); anything else is a failed bench (exit 1).
  if ((e as { code?: string }).code?.startsWith('ERR_PARSE_ARGS') || e instanceof UsageError) {
    console.error(`${(e as Error).message}\nusage: node dist/bench/run.js [--quick] [--out-dir DIR] [--sections ${SECTIONS.join(',')}] [--reps N] [--throughput-samples S] [--throughput-reps N] [--raw-throughput] [--keep]`);
    process.exit(2);
  }
  console.error(e instanceof Error ? (e.stack ?? e.message) : String(e));
  process.exit(1);
});
