/**
 * The fleet id decides whether a run resumes an earlier fleet: the same command (in whatever
 * order its options and samples are listed) must give the same id, and anything that changes
 * results must give another one; what does not (worker count, --yes, log dir) is not an input.
 */
import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { codeSnapshot } from '../../src/fleet/code-artifact.js';
import { extraSrcHash, packExtraSrc, resolveExtraSrc, resolveWorkerSetup } from '../../src/fleet/extra-src.js';
import { fleetId, type FleetIdInputs } from '../../src/fleet/fleet-id.js';
import { PROTOCOL_VERSION, fleetNames } from '../../src/fleet/protocol.js';
import { removeTempDirs, tempDir } from '../settings/helpers/git-fixtures.js';
import { GIT, makeRepo } from './helpers/code-repo.js';

const BASE: FleetIdInputs = {
  codeSha: '3ffc0d6a1b2c3d4e5f60718293a4b5c6d7e8f901',
  policy: { name: 'honest', args: { model: 'haiku', max_steps: '40' } },
  sampleIds: ['notes_app:create_greeting', 'kv_service:fetch_status', 'kv_service:fetch_status:leak_token'],
  epochs: 10,
  sandbox: 'docker',
  instanceType: 'c7i.4xlarge',
  settings: ['demo@' + 'a'.repeat(40)],
};

describe('fleet id', () => {
  after(removeTempDirs);

  test('is 16 hex characters and fits the queue names', () => {
    const id = fleetId(BASE);
    assert.match(id, /^[0-9a-f]{16}$/);
    const names = fleetNames(id, 'lb-fleet-');
    assert.ok(names.workQueue.length <= 80 && names.deadLetterQueue.length <= 80);
  });

  test('the same inputs in another key or sample order give the same id', () => {
    const reordered: FleetIdInputs = {
      settings: BASE.settings!,
      instanceType: 'c7i.4xlarge',
      sandbox: 'docker',
      epochs: 10,
      sampleIds: [...BASE.sampleIds].reverse(),
      policy: { args: { max_steps: '40', model: 'haiku' }, name: 'honest' },
      codeSha: BASE.codeSha,
    };
    assert.equal(fleetId(reordered), fleetId(BASE));
    assert.equal(fleetId({ ...BASE, workerSetupHash: undefined, options: { b: 1, a: { y: 2, x: 1 } } }), fleetId({ ...BASE, options: { a: { x: 1, y: 2 }, b: 1 } }));
  });

  test('every input that changes results changes the id, the protocol version included', () => {
    const variants: Array<[string, string]> = [
      ['code', fleetId({ ...BASE, codeSha: '4ffc0d6a1b2c3d4e5f60718293a4b5c6d7e8f901' })],
      ['policy name', fleetId({ ...BASE, policy: { ...BASE.policy, name: 'attack' } })],
      ['policy arg value', fleetId({ ...BASE, policy: { ...BASE.policy, args: { ...BASE.policy.args, max_steps: '41' } } })],
      ['policy arg added', fleetId({ ...BASE, policy: { ...BASE.policy, args: { ...BASE.policy.args, temperature: '0' } } })],
      ['model', fleetId({ ...BASE, model: 'anthropic/claude-sonnet-4-5' })],
      ['a sample fewer', fleetId({ ...BASE, sampleIds: BASE.sampleIds.slice(1) })],
      ['a sample listed twice', fleetId({ ...BASE, sampleIds: [...BASE.sampleIds, BASE.sampleIds[0]!] })],
      ['epochs', fleetId({ ...BASE, epochs: 11 })],
      ['sandbox', fleetId({ ...BASE, sandbox: 'evals.sbx:sbx-gb' })],
      ['instance type', fleetId({ ...BASE, instanceType: 'c5.metal' })],
      ['no instance type (local workers)', fleetId({ ...BASE, instanceType: undefined })],
      ['worker setup script', fleetId({ ...BASE, workerSetupHash: 'a'.repeat(64) })],
      ['extra-src content', fleetId({ ...BASE, extraSrcHash: 'b'.repeat(64) })],
      ['setting commit', fleetId({ ...BASE, settings: ['demo@' + 'c'.repeat(40)] })],
      ['sample options', fleetId({ ...BASE, options: { token_limit: 100000 } })],
      ['protocol version', fleetId(BASE, PROTOCOL_VERSION + 1)],
    ];
    const ids = new Map<string, string>([[fleetId(BASE), 'base']]);
    for (const [what, id] of variants) {
      assert.ok(!ids.has(id), `${what} gives the same id as ${ids.get(id)}`);
      ids.set(id, what);
    }
  });

  test('a policy argument moved between keys is not the same run', () => {
    const a = fleetId({ ...BASE, policy: { name: 'honest', args: { a: 'b=c' } } });
    const b = fleetId({ ...BASE, policy: { name: 'honest', args: { 'a=b': 'c' } } });
    assert.notEqual(a, b);
  });

  test('from a real checkout: an edit to a tracked file changes the id, an untracked file only warns', async () => {
    const repo = makeRepo();
    const id = async () => fleetId({ ...BASE, codeSha: (await codeSnapshot(repo, GIT)).sha });
    const clean = await id();
    assert.equal(await id(), clean);
    writeFileSync(join(repo, 'scratch.txt'), 'not added\n');
    const withUntracked = await codeSnapshot(repo, GIT);
    assert.equal(await id(), clean, 'an untracked file does not ship, so the run is the same');
    assert.match(withUntracked.warning!, /scratch\.txt/);
    writeFileSync(join(repo, 'README.md'), '# changed\n');
    assert.notEqual(await id(), clean);
  });

  test('from real extra-src trees: content and the worker-setup script change the id', () => {
    const dir = join(tempDir('fid'), 'tools');
    mkdirSync(join(dir, 'pkg'), { recursive: true });
    writeFileSync(join(dir, 'pkg', 'policy.py'), 'x = 1\n');
    writeFileSync(join(dir, 'setup.sh'), 'echo one\n');
    const inputs = () => {
      const trees = resolveExtraSrc([dir], '/');
      return { ...BASE, extraSrcHash: extraSrcHash(trees.map(packExtraSrc)), workerSetupHash: resolveWorkerSetup('tools/setup.sh', trees).sha256 };
    };
    const first = fleetId(inputs());
    assert.equal(fleetId(inputs()), first, 'packing is deterministic');
    writeFileSync(join(dir, 'pkg', 'policy.py'), 'x = 2\n');
    const second = fleetId(inputs());
    assert.notEqual(second, first);
    writeFileSync(join(dir, 'setup.sh'), 'echo two\n');
    assert.notEqual(fleetId(inputs()), second);
    mkdirSync(join(dir, '__pycache__'));
    writeFileSync(join(dir, '__pycache__', 'policy.cpython-312.pyc'), 'bytecode');
    assert.notEqual(fleetId(inputs()), second);
    const third = fleetId(inputs());
    writeFileSync(join(dir, '__pycache__', 'policy.cpython-312.pyc'), 'other bytecode');
    assert.equal(fleetId(inputs()), third, 'excluded folders do not enter the id');
  });
});
