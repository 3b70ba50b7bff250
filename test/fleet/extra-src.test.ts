/**
 * `--extra-src` trees as workers receive them: the spec's exclusions, a deterministic archive
 * that `tar` unpacks under the tree's basename, and the usage errors (exit 2) raised before any
 * cloud call: missing folder, duplicate basename, `--worker-setup` outside the trees.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, readFileSync, statSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { after, describe, test } from 'node:test';
import { ConfigError } from '../../src/errors.js';
import { packExtraSrc, resolveExtraSrc, resolveWorkerSetup, shippedFiles } from '../../src/fleet/extra-src.js';
import { removeTempDirs, tempDir } from '../settings/helpers/git-fixtures.js';

function write(root: string, files: Record<string, string>): void {
  for (const [rel, text] of Object.entries(files)) {
    mkdirSync(dirname(join(root, rel)), { recursive: true });
    writeFileSync(join(root, rel), text);
  }
}

/** A tree with a package and one of everything that must not ship. */
function experiments(parent = tempDir('xs')): string {
  const dir = join(parent, 'experiments');
  write(dir, {
    'mypkg/__init__.py': '',
    'mypkg/policies.py': 'def my_policy(): ...\n',
    'mypkg/__pycache__/policies.cpython-312.pyc': 'bytecode',
    'setup/worker-setup.sh': '#!/bin/sh\necho ready\n',
    '.git/HEAD': 'ref: refs/heads/main\n',
    'node_modules/left-pad/index.js': 'x',
    '.venv/bin/python': 'x',
    'venv/bin/python': 'x',
    'build/lib/mypkg/policies.py': 'old copy',
    'dist/mypkg-0.1.tar.gz': 'x',
    'uv.lock': 'x',
    'poetry.lock': 'x',
    'package-lock.json': '{}',
    'sub/yarn.lock': 'x',
    'README.md': '# experiments\n',
  });
  chmodSync(join(dir, 'setup/worker-setup.sh'), 0o755);
  return dir;
}

describe('extra-src', () => {
  after(removeTempDirs);

  test('ships the source and leaves out caches, VCS metadata, environments, build output and lockfiles at any depth', () => {
    assert.deepEqual(shippedFiles(experiments()), ['README.md', 'mypkg/__init__.py', 'mypkg/policies.py', 'setup/worker-setup.sh']);
  });

  test('the archive unpacks with tar under the basename, with contents and the executable bit', () => {
    const [tree] = resolveExtraSrc([experiments()], '/');
    const packed = packExtraSrc(tree!);
    const out = tempDir('xs-out');
    writeFileSync(join(out, 'a.tar.gz'), packed.gzip);
    execFileSync('tar', ['-xzf', 'a.tar.gz'], { cwd: out });
    assert.equal(readFileSync(join(out, 'experiments/mypkg/policies.py'), 'utf8'), 'def my_policy(): ...\n');
    assert.equal(statSync(join(out, 'experiments/setup/worker-setup.sh')).mode & 0o777, 0o755);
    assert.equal(statSync(join(out, 'experiments/README.md')).mode & 0o777, 0o644);
    const listed = execFileSync('tar', ['-tzf', 'a.tar.gz'], { cwd: out, encoding: 'utf8' }).trim().split('\n');
    assert.deepEqual(listed, packed.files.map((f) => `experiments/${f}`));
  });

  test('the same content packs to the same hash wherever it lives and whatever its timestamps; other content does not', () => {
    const a = packExtraSrc(resolveExtraSrc([experiments()], '/')[0]!);
    const otherDir = experiments();
    utimesSync(join(otherDir, 'README.md'), new Date('2001-01-01'), new Date('2001-01-01'));
    const b = packExtraSrc(resolveExtraSrc([otherDir], '/')[0]!);
    assert.equal(b.sha256, a.sha256);
    assert.deepEqual(b.gzip, a.gzip);
    writeFileSync(join(otherDir, 'mypkg/policies.py'), 'def my_policy(): return 1\n');
    assert.notEqual(packExtraSrc(resolveExtraSrc([otherDir], '/')[0]!).sha256, a.sha256);
  });

  test('long paths are packed with the ustar prefix and unpack intact', () => {
    const dir = join(tempDir('xs-long'), 'deep');
    const rel = `${'a'.repeat(60)}/${'b'.repeat(60)}/${'c'.repeat(40)}.py`;
    write(dir, { [rel]: 'deep = True\n' });
    const out = tempDir('xs-long-out');
    writeFileSync(join(out, 'a.tar.gz'), packExtraSrc(resolveExtraSrc([dir], '/')[0]!).gzip);
    execFileSync('tar', ['-xzf', 'a.tar.gz'], { cwd: out });
    assert.equal(readFileSync(join(out, 'deep', rel), 'utf8'), 'deep = True\n');
  });

  test('a missing folder, a file, or two trees with one basename are usage errors naming the problem', () => {
    const parent = tempDir('xs-bad');
    const one = experiments(join(parent, 'one'));
    const two = experiments(join(parent, 'two'));
    assert.throws(() => resolveExtraSrc([join(parent, 'nope')], '/'), (e: unknown) => e instanceof ConfigError && /no such folder/.test(e.message));
    assert.throws(() => resolveExtraSrc([join(one, 'README.md')], '/'), (e: unknown) => e instanceof ConfigError && /not a folder/.test(e.message));
    assert.throws(() => resolveExtraSrc([one, two], '/'), (e: unknown) => e instanceof ConfigError && /same basename "experiments"/.test(e.message));
    assert.throws(() => resolveExtraSrc([join(one, 'build')], '/'), (e: unknown) => e instanceof ConfigError && /never shipped/.test(e.message));
  });

  test('--worker-setup must be a shipped file inside an extra-src tree', () => {
    const parent = tempDir('xs-ws');
    const trees = resolveExtraSrc([experiments(parent)], '/');
    writeFileSync(join(parent, 'outside.sh'), 'echo outside\n');
    symlinkSync(join(parent, 'outside.sh'), join(parent, 'experiments', 'escape.sh'));
    const ok = resolveWorkerSetup('experiments/setup/worker-setup.sh', trees);
    assert.equal(ok.path, 'experiments/setup/worker-setup.sh');
    assert.match(ok.sha256, /^[0-9a-f]{64}$/);
    const refused: Array<[string, RegExp]> = [
      ['other/setup.sh', /inside an --extra-src tree \(the trees are: experiments\)/],
      ['experiments', /<basename>\/<path>/],
      ['experiments/setup/missing.sh', /no such file/],
      ['experiments/../outside.sh', /must be a file inside --extra-src experiments/],
      ['experiments/escape.sh', /must be a file inside --extra-src experiments/],
      ['experiments/setup', /must be a file inside/],
      ['experiments/build/lib/mypkg/policies.py', /not shipped/],
    ];
    for (const [spec, message] of refused) {
      assert.throws(() => resolveWorkerSetup(spec, trees), (e: unknown) => e instanceof ConfigError && message.test(e.message), spec);
    }
    assert.throws(() => resolveWorkerSetup('experiments/setup/worker-setup.sh', []), (e: unknown) => e instanceof ConfigError && /give the tree holding it with --extra-src/.test(e.message));
  });
});
