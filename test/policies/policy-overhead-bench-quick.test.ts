import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { test } from 'node:test';
import { REPO_ROOT } from '../helpers/paths.js';

// The bench is a script, not a test; this only checks that `--quick` runs and prints its table.
test('bench/policy-overhead --quick prints a row per provider and path, with a floor line', async () => {
  const out = await new Promise<string>((resolve, reject) => {
    const child = spawn(process.execPath, [join(REPO_ROOT, 'dist', 'bench', 'policy-overhead.js'), '--quick'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve(stdout) : reject(new Error(`exit ${code}\n${stderr}\n${stdout}`))));
  });
  const rows = out.split('\n').filter((l) => l.startsWith('| ') && !l.startsWith('| ---'));
  assert.equal(rows[0], '| provider | path | steps | mean ms | p50 ms | p95 ms | max ms | late steps ms | mean < 5 ms |');
  const body = rows.slice(1).map((r) => r.split(' | ').map((c) => c.replace(/^\| | \|$/g, '')));
  assert.deepEqual(body.map((c) => `${c[0]} ${c[1]}`), ['anthropic SDK + HTTP', 'openai SDK + HTTP', 'anthropic ct only', 'openai ct only']);
  for (const c of body) {
    assert.equal(c[2], '20');
    for (const n of c.slice(3, 8)) assert.ok(Number.isFinite(Number(n)) && Number(n) >= 0, `a number of ms: ${n}`);
  }
  assert.match(out, /Configuration: 20 steps a run, 1 run\(s\) per row \(--quick\)/);
  assert.match(out, /a bare fetch round trip \d+\.\d\d ms/);
});
