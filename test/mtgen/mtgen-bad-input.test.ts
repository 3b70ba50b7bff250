import assert from 'node:assert/strict';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { GOOD, ct, mtgenServer, mtgenWorld, runAllArgs } from './helpers/mtgen-world.js';

describe('ct run mtgen: bad input exits 2, names the problem, creates and changes nothing', () => {
  const server = mtgenServer([GOOD]);
  before(() => server.start());
  after(() => server.stop());

  it('unknown environment or side task, bad band, missing key, unpriced model under --budget: no run directory', async () => {
    const w = mtgenWorld(server);
    const cases: Array<[string[], Record<string, string | undefined>, RegExp]> = [
      [['run', 'mtgen', 'run-all', '-e', 'nope', '-s', 'plant_file', '--no-ec2'], {}, /unknown environment "nope"; valid environments: tiny/],
      [['run', 'mtgen', 'run-all', '-e', 'tiny', '-s', 'nope', '--no-ec2'], {}, /unknown side task "nope" in environment tiny; its side tasks: plant_file/],
      [runAllArgs(['--pass-min', '0.9', '--pass-max', '0.1']), {}, /--pass-min 0.9 is above --pass-max 0.1/],
      [runAllArgs(['--pass-min', '2']), {}, /--pass-min.*must be a number from 0 to 1/],
      [runAllArgs(), { ANTHROPIC_API_KEY: undefined, ANTHROPIC_BASE_URL: undefined }, /model anthropic\/claude-haiku-4-5 needs ANTHROPIC_API_KEY/],
      [runAllArgs(['--budget', '1', '--model', 'openai/my-local-model']), {}, /--budget needs the price of openai\/my-local-model/],
    ];
    for (const [args, extra, message] of cases) {
      const r = await ct(args, w.env(extra), w.root);
      assert.equal(r.code, 2, `${args.join(' ')}\n${r.stderr}`);
      assert.match(r.stderr, message);
      assert.ok(!existsSync(w.dataDir), `${args.join(' ')} created ${w.dataDir}`);
    }
    assert.equal(server.requests.length, 0);
  });

  it('a run directory that is not one, or whose state.json is corrupt or invalid: exit 2, the files untouched', async () => {
    const w = mtgenWorld(server);
    const notRun = join(w.root, 'not-a-run');
    mkdirSync(notRun);
    writeFileSync(join(notRun, 'notes.txt'), 'mine');
    const corrupt = join(w.root, 'corrupt');
    mkdirSync(corrupt);
    writeFileSync(join(corrupt, 'state.json'), '{"version": 1, "runId": ');
    const invalid = join(w.root, 'invalid');
    mkdirSync(invalid);
    const options = { count: 1, epochs: 1, model: 'haiku', evalModel: 'haiku', passMin: 0.2, passMax: 0.8, ec2: false, yes: true };
    const valid = { version: 1, runId: 'x', env: 'lab:tiny', sideTask: 'plant_file', createdAt: '2026-01-01T00:00:00Z', options, done: [], usage: [] };
    writeFileSync(join(invalid, 'state.json'), JSON.stringify({ ...valid, candidates: 'none' }));
    const cases: Array<[string, RegExp]> = [
      [join(w.root, 'missing'), /run directory .*missing does not exist; start a run with `ct run mtgen run-all/],
      [notRun, /not-a-run is not an mtgen run directory \(it has no state.json\)/],
      [corrupt, /corrupt\/state.json is not valid JSON .*; restore it or fix it by hand; nothing was changed/],
      [invalid, /invalid\/state.json is not a valid mtgen state \(.*candidates.*\)/],
    ];
    const snapshot = (d: string) => (existsSync(d) ? readdirSync(d).map((f) => [f, readFileSync(join(d, f), 'utf8')]) : []);
    for (const [dir, message] of cases) {
      const before = snapshot(dir);
      const commands = [['run', 'mtgen', 'live-run', '--run-dir', dir, '--no-ec2']];
      if (dir === corrupt) commands.push(['run', 'mtgen', 'status', '--run-dir', dir]);
      for (const args of commands) {
        const r = await ct(args, w.env(), w.root);
        assert.equal(r.code, 2, `${args.join(' ')}\n${r.stderr}`);
        assert.match(r.stderr, message);
      }
      assert.deepEqual(snapshot(dir), before);
    }
    assert.equal(server.requests.length, 0);
  });

  it('a run another live process is working on: exit 2 naming its pid, the lock and state untouched', async () => {
    const w = mtgenWorld(server);
    const first = await ct(runAllArgs(['--budget', '0.001'], 1), w.env(), w.root);
    assert.equal(first.code, 3, first.stderr);
    const runDir = /^run directory: (.+)$/m.exec(first.stdout)![1]!;
    assert.ok(!existsSync(join(runDir, 'run.lock')), 'the lock goes when the run stops');
    // This test process stands for a live ct working on the run.
    writeFileSync(join(runDir, 'run.lock'), `${process.pid}\n`);
    const state = readFileSync(join(runDir, 'state.json'), 'utf8');
    const r = await ct(['run', 'mtgen', 'live-run', '--run-dir', runDir, '--budget', '5', '--no-ec2'], w.env(), w.root);
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, new RegExp(`another ct process \\(pid ${process.pid}\\) is working on`));
    assert.equal(readFileSync(join(runDir, 'state.json'), 'utf8'), state);
    assert.equal(readFileSync(join(runDir, 'run.lock'), 'utf8').trim(), String(process.pid));
    assert.equal(server.requests.length, 0);
  });

  it('--help of each subcommand shows an example', async () => {
    const w = mtgenWorld(server);
    for (const sub of ['run-all', 'live-run', 'status']) {
      const r = await ct(['run', 'mtgen', sub, '--help'], w.env(), w.root);
      assert.equal(r.code, 0);
      assert.match(r.stdout, new RegExp(`Examples?:\\n  ct run mtgen ${sub}`));
    }
  });
});
