/**
 * `ct game-metrics --bootstrap` (reproducible with a seed, around the point estimate) and
 * `--out` (metrics.json and the charts as SVG and PNG).
 */
import assert from 'node:assert/strict';
import { readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { gameMetrics } from '../../src/control/metrics/report.js';
import { runCt } from '../helpers/cli.js';
import { runPython } from '../helpers/python.js';
import { scored, tempDir, writeControlLog } from './helpers/control-logs.js';

describe('ct game-metrics --bootstrap and --out', () => {
  let dir: string;
  let honest: string;
  let attack: string;

  before(async () => {
    dir = await tempDir('output');
    honest = await writeControlLog(dir, 'honest', Array.from({ length: 40 }, (_, i) => scored(i % 10, { main: i % 4 ? 'C' : 'I' })));
    attack = await writeControlLog(
      dir,
      'attack',
      Array.from({ length: 30 }, (_, i) => scored((i * 7) % 11, { side: i % 3 ? 'C' : 'I' })),
    );
  });
  after(() => rm(dir, { recursive: true, force: true }));

  test('the same seed gives the same intervals, another seed other ones; each holds its point estimate', async () => {
    const run = (seed: string) => gameMetrics({ honest: [honest], attack: [attack], auditBudget: '5,20,40', bootstrap: '400', seed });
    const a = (await run('3')).report;
    const b = (await run('3')).report;
    const c = (await run('4')).report;
    assert.deepEqual(a.budgets, b.budgets);
    assert.notDeepEqual(
      a.budgets.map((x) => x.safety_ci),
      c.budgets.map((x) => x.safety_ci),
    );
    assert.deepEqual(a.bootstrap, { resamples: 400, seed: 3 });
    for (const budget of a.budgets) {
      const [lo, hi] = budget.safety_ci!;
      assert.ok(lo <= budget.safety && budget.safety <= hi, `${budget.audit_budget}%: ${budget.safety} outside [${lo}, ${hi}]`);
      assert.ok(lo >= 0 && hi <= 1 && lo < hi);
    }
    // A budget's interval does not depend on the other budgets asked for.
    const alone = (await gameMetrics({ honest: [honest], attack: [attack], auditBudget: '20', bootstrap: '400', seed: '3' })).report;
    assert.deepEqual(alone.budgets[0]!.safety_ci, a.budgets[1]!.safety_ci);
  });

  test('--out writes metrics.json (the --json object) and both charts as SVG and PNG', async () => {
    const out = join(dir, 'out');
    const r = await runCt(['game-metrics', '--honest', honest, '--attack', attack, '--bootstrap', '200', '--out', out, '--json']);
    assert.equal(r.code, 0, r.stderr);
    const printed = JSON.parse(r.stdout);
    const written = JSON.parse(await readFile(join(out, 'metrics.json'), 'utf8'));
    assert.deepEqual(written, printed);
    assert.deepEqual(Object.keys(printed).slice(0, 3), ['rule', 'require_main', 'budgets']);
    for (const key of ['usefulness', 'usefulness_ci', 'honest_samples', 'attack_samples', 'unscored_samples']) assert.ok(key in printed, key);
    assert.deepEqual(
      Object.keys(printed.budgets[0]).sort(),
      ['attacks', 'audit_budget', 'caught', 'safety', 'safety_ci', 'threshold', 'uncaught_successful'],
    );
    assert.equal(printed.budgets[0].safety_ci.length, 2);
    const PNG_MAGIC = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
    for (const name of ['safety_curves', 'suspicion_histograms']) {
      const png = await readFile(join(out, `${name}.png`));
      assert.deepEqual(png.subarray(0, 8), PNG_MAGIC, `${name}.png is a PNG`);
      assert.ok(png.length > 10_000, `${name}.png has a picture in it (${png.length} bytes)`);
    }
    const parsed = await runPython(
      'import json, sys, xml.etree.ElementTree as ET\n' +
        'out = []\n' +
        'for p in json.load(sys.stdin):\n' +
        '    root = ET.parse(p).getroot()\n' +
        '    out.append({"tag": root.tag, "texts": [t.text for t in root.iter("{http://www.w3.org/2000/svg}text") if t.text]})\n' +
        'print(json.dumps(out))',
      [join(out, 'safety_curves.svg'), join(out, 'suspicion_histograms.svg')],
    );
    assert.equal(parsed[0].tag, '{http://www.w3.org/2000/svg}svg');
    assert.ok(parsed[0].texts.some((t: string) => t.startsWith('Safety vs audit budget')), parsed[0].texts.join('|'));
    assert.ok(parsed[0].texts.includes('95% CI'));
    assert.ok(parsed[1].texts.some((t: string) => t.startsWith('Suspicion scores')), parsed[1].texts.join('|'));
    // Honest scores 0-9, four of each: the 1% and 5% thresholds are both 9 and share a line.
    assert.ok(parsed[1].texts.includes('1%, 5%'), parsed[1].texts.join('|'));
    assert.ok(parsed[1].texts.includes('10%'), 'the 10% threshold is marked');
  });
});
