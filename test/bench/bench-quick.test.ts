import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { SCALE_METRICS } from '../../bench/section-scale.js';
import { REPO_ROOT } from '../helpers/paths.js';

/** The rows `--quick` must print: every section, configuration and metric, by name. */
const LATENCY_CONFIGS = ['1 service, N=1', '1 service, N=20', '3 services + healthcheck, N=1', '3 services + healthcheck, N=20'];
const LATENCY_METRICS = [
  'sample wall (sandbox init to cleanup end), s',
  'sandbox init, s',
  'sandbox cleanup, s',
  'sandbox init + cleanup, s',
  'per-call median, ms',
  'per-call p95, ms',
  'exec (`echo`) median, ms',
];
const PROCESS_METRICS = ['start-up (process start to first sandbox init), s', 'wind-down (last sandbox cleanup to exit), s'];
const THROUGHPUT_METRICS = ['samples per minute', 'orchestrator CPU (user+sys), s', 'Docker Engine CPU (dockerd+containerd), s'];
const REMOTE_METRICS = [
  'exec (`echo`) median, ms',
  'exec (`echo`) p95, ms',
  'exec (`echo`) median, raw over one reused SSH connection, ms',
];

interface TableRow {
  section: string;
  config: string;
  metric: string;
  ct: string;
  inspect: string;
  raw: string;
  vsInspect: string;
  vsRaw: string;
}

/** `12.3` or `12.3 [11.0–14.2]`: a measured cell. */
const NUMBER_CELL = /^\d+(\.\d+)?( \[\d+(\.\d+)?–\d+(\.\d+)?\])?$/;
const RATIO_CELL = /^\d+\.\d\dx$/;

function parseTable(out: string): TableRow[] {
  const lines = out.split('\n').filter((l) => l.startsWith('| '));
  assert.ok(lines.length > 2, `a markdown table in the output:\n${out}`);
  assert.equal(lines[0], '| section | configuration | metric | ct | Inspect | raw | ct/Inspect | ct/raw |');
  return lines.slice(2).map((l) => {
    const c = l.split(' | ').map((x) => x.replace(/^\| |\s\|$/g, '').trim());
    assert.equal(c.length, 8, `8 cells in: ${l}`);
    return { section: c[0]!, config: c[1]!, metric: c[2]!, ct: c[3]!, inspect: c[4]!, raw: c[5]!, vsInspect: c[6]!, vsRaw: c[7]! };
  });
}

function find(rows: TableRow[], section: string, config: string | RegExp, metric: string): TableRow {
  const hits = rows.filter((r) => r.section === section && (typeof config === 'string' ? r.config === config : config.test(r.config)) && r.metric === metric);
  assert.equal(hits.length, 1, `one row ${section} / ${config} / ${metric}; found ${hits.length}`);
  return hits[0]!;
}

function numeric(row: TableRow, cells: Array<keyof TableRow>): void {
  for (const k of cells) assert.match(row[k], k === 'vsInspect' || k === 'vsRaw' ? RATIO_CELL : NUMBER_CELL, `${k} of ${row.section} / ${row.config} / ${row.metric}`);
}

describe('npm run bench -- --quick', () => {
  let outDir: string;
  let stdout = '';
  let stderr = '';
  let code: number | null = null;

  before(async () => {
    outDir = mkdtempSync(join(tmpdir(), 'ct-bench-quick-'));
    await new Promise<void>((resolve, reject) => {
      const child = spawn(process.execPath, [join(REPO_ROOT, 'dist', 'bench', 'run.js'), '--quick', '--out-dir', outDir], {
        cwd: REPO_ROOT,
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      // A hung bench fails the test instead of hanging CI (the quick bench takes 4-9 minutes).
      const timer = setTimeout(() => child.kill('SIGKILL'), 25 * 60_000);
      child.stdout.on('data', (d) => (stdout += d));
      child.stderr.on('data', (d) => (stderr += d));
      child.on('error', reject);
      child.on('close', (c) => {
        clearTimeout(timer);
        code = c;
        resolve();
      });
    });
  });

  after(() => rmSync(outDir, { recursive: true, force: true }));

  test('exits 0 and prints no NaN', () => {
    assert.equal(code, 0, `bench failed:\n${stderr.slice(-4000)}`);
    assert.doesNotMatch(stdout, /NaN|Infinity|undefined/);
  });

  test('prints the configuration that produced the numbers', () => {
    assert.match(stdout, /^- machine: \d+ CPUs/m);
    assert.match(stdout, /^- latency: N = 1, 20; 1 repetition/m);
    assert.match(stdout, /^- throughput: 4 samples/m);
    assert.match(stdout, /^- scale: .* at N = 100, 300;/m);
  });

  test('latency: every environment × N × metric, measured for ct, Inspect and raw, with both ratios', () => {
    const rows = parseTable(stdout);
    for (const config of LATENCY_CONFIGS) {
      for (const metric of LATENCY_METRICS) numeric(find(rows, 'latency', config, metric), ['ct', 'inspect', 'raw', 'vsInspect', 'vsRaw']);
    }
    for (const metric of PROCESS_METRICS) numeric(find(rows, 'latency', 'per process, over all latency runs', metric), ['ct', 'inspect', 'vsInspect']);
  });

  test('throughput: concurrency 1, 4 and 8 for ct and Inspect', () => {
    const rows = parseTable(stdout);
    for (const c of [1, 4, 8]) {
      for (const metric of THROUGHPUT_METRICS) {
        const row = find(rows, 'throughput', new RegExp(`^1 service, 4 samples × 20 calls, concurrency ${c}$`), metric);
        numeric(row, ['ct', 'inspect', 'vsInspect']);
      }
    }
  });

  test('remote: measured over the loopback sshd, or skipped with the reason', () => {
    const rows = parseTable(stdout);
    for (const metric of REMOTE_METRICS) {
      const row = find(rows, 'remote (SSH)', /^loopback sshd/, metric);
      if (row.ct.startsWith('skipped: ')) assert.ok(row.ct.length > 'skipped: '.length + 5, 'a reason for the skip');
      else numeric(row, ['ct', 'raw', 'vsRaw']);
    }
  });

  test('sandbox API section folded in from bench/sandbox-overhead.js', () => {
    const rows = parseTable(stdout).filter((r) => r.section === 'sandbox API');
    assert.ok(rows.length >= 4, `sandbox API rows: ${rows.length}`);
    for (const r of rows) assert.match(`${r.ct}${r.raw}`.replace(/–/g, ''), /^\d+(\.\d+)? ms \(p95 \d+(\.\d+)?\)$/, r.metric);
  });

  test('scale: 100 and 300 samples for ct (Inspect at 100, skipped above with the reason), and a merge', () => {
    const rows = parseTable(stdout).filter((r) => r.section === 'scale');
    for (const n of ['100', '300']) {
      for (const metric of SCALE_METRICS) {
        const row = find(rows, 'scale', `${n} samples, --max-samples 8`, metric);
        if (n === '100') numeric(row, ['ct', 'inspect', 'vsInspect']);
        else {
          numeric(row, ['ct']);
          assert.match(row.inspect, /^skipped: above 100 samples$/);
        }
      }
    }
    assert.equal(find(rows, 'scale', '100 samples, --max-samples 8', 'CPU per sample vs the 100-sample run').ct, '1.00');
    for (const metric of ['merge wall, s', 'merge peak RSS, MB', 'merged log size, MB']) numeric(find(rows, 'scale', 'merge of 300 one-sample logs', metric), ['ct']);
  });

  test('writes the raw numbers as JSON and an SVG chart', () => {
    const files = readdirSync(outDir);
    const json = files.find((f) => /^bench-quick-.*\.json$/.test(f));
    assert.ok(json, `a JSON file in ${files.join(', ')}`);
    const data = JSON.parse(readFileSync(join(outDir, json), 'utf8')) as { rows: unknown[]; runs: { latency: { samples: unknown[] } } };
    assert.equal(data.rows.length, parseTable(stdout).length);
    assert.ok(data.runs.latency.samples.length >= 12, 'every latency sample recorded');
    const svg = join(outDir, 'bench-quick.svg');
    assert.ok(existsSync(svg));
    const text = readFileSync(svg, 'utf8');
    assert.match(text, /^<svg xmlns="http:\/\/www.w3.org\/2000\/svg"/);
    assert.match(text, /Orchestrator CPU per sample by run size/);
    assert.ok(text.trimEnd().endsWith('</svg>'));
  });
});
