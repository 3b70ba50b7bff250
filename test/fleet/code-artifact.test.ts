/**
 * What code fleet workers get: HEAD of a clean checkout; a stable tree SHA of a dirty one whose
 * archive holds the uncommitted edits; untracked files reported for a warning and never shipped;
 * the user's own index left as it was; the archive uploaded only when absent.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { buildArchive, codeSnapshot, uploadArtifact } from '../../src/fleet/code-artifact.js';
import { MemoryBucket, MemoryResultStore } from '../../src/fleet/memory-result-store.js';
import { git, removeTempDirs, tempDir } from '../settings/helpers/git-fixtures.js';
import { GIT, makeRepo } from './helpers/code-repo.js';

function archive(repo: string, sha: string): Promise<string> {
  return buildArchive(repo, sha, { ...GIT, outFile: join(tempDir('code-a'), `${sha}.tar.gz`) });
}

/** The archive's files and their contents. */
function extract(file: string): Map<string, string> {
  const out = tempDir('code-x');
  execFileSync('tar', ['-xzf', file, '-C', out]);
  const files = execFileSync('find', ['.', '-type', 'f'], { cwd: out, encoding: 'utf8' })
    .split('\n')
    .filter(Boolean)
    .map((f) => f.replace(/^\.\//, ''))
    .sort();
  return new Map(files.map((f) => [f, readFileSync(join(out, f), 'utf8')]));
}

describe('code artifact', () => {
  after(removeTempDirs);

  test('a clean checkout ships HEAD, and its archive is exactly the committed tree', async () => {
    const repo = makeRepo();
    mkdirSync(join(repo, 'dist'));
    writeFileSync(join(repo, 'dist', 'out.js'), 'ignored build output\n');
    const snap = await codeSnapshot(join(repo, 'src'), GIT);
    assert.equal(snap.kind, 'commit');
    assert.equal(snap.sha, git(repo, 'rev-parse', 'HEAD'));
    assert.deepEqual(snap.untracked, []);
    assert.equal(snap.warning, undefined);
    const files = extract(await archive(repo, snap.sha));
    assert.deepEqual([...files.keys()], ['.gitignore', 'README.md', 'src/a.ts']);
  });

  test('an uncommitted edit gives a different, stable tree SHA whose archive has the edit; the index is untouched', async () => {
    const repo = makeRepo();
    const head = git(repo, 'rev-parse', 'HEAD');
    writeFileSync(join(repo, 'src', 'a.ts'), 'export const a = 2;\n');
    const indexBefore = readFileSync(join(repo, '.git', 'index'));
    const first = await codeSnapshot(repo, GIT);
    const second = await codeSnapshot(repo, GIT);
    assert.equal(first.kind, 'tree');
    assert.notEqual(first.sha, head);
    assert.equal(second.sha, first.sha, 'the same edit pins the same SHA');
    assert.equal(git(repo, 'cat-file', '-t', first.sha), 'tree');
    assert.deepEqual(readFileSync(join(repo, '.git', 'index')), indexBefore, "the user's index is not changed");
    assert.equal(git(repo, 'status', '--porcelain'), 'M src/a.ts', 'nothing was staged');
    assert.equal(extract(await archive(repo, first.sha)).get('src/a.ts'), 'export const a = 2;\n');

    writeFileSync(join(repo, 'src', 'a.ts'), 'export const a = 3;\n');
    assert.notEqual((await codeSnapshot(repo, GIT)).sha, first.sha);
    writeFileSync(join(repo, 'src', 'a.ts'), 'export const a = 1;\n');
    const back = await codeSnapshot(repo, GIT);
    assert.deepEqual([back.kind, back.sha], ['commit', head]);
  });

  test('a deleted file and a staged new file are shipped as they are on disk', async () => {
    const repo = makeRepo();
    rmSync(join(repo, 'README.md'));
    writeFileSync(join(repo, 'src', 'b.ts'), 'export const b = 1;\n');
    git(repo, 'add', 'src/b.ts');
    const snap = await codeSnapshot(repo, GIT);
    assert.equal(snap.kind, 'tree');
    assert.deepEqual([...extract(await archive(repo, snap.sha)).keys()], ['.gitignore', 'src/a.ts', 'src/b.ts']);
  });

  test('untracked files are reported with a warning and not shipped', async () => {
    const repo = makeRepo();
    writeFileSync(join(repo, 'src', 'new-policy.ts'), 'export {};\n');
    mkdirSync(join(repo, 'notes'));
    writeFileSync(join(repo, 'notes', 'todo.txt'), 'x\n');
    const snap = await codeSnapshot(repo, GIT);
    assert.equal(snap.kind, 'commit', 'untracked files alone do not make the checkout dirty');
    assert.deepEqual(snap.untracked, ['notes/todo.txt', 'src/new-policy.ts']);
    assert.match(snap.warning!, /2 untracked file\(s\).*brand-new untracked files require git add to ship.*notes\/todo\.txt, src\/new-policy\.ts/);
    const files = extract(await archive(repo, snap.sha));
    assert.ok(!files.has('src/new-policy.ts') && !files.has('notes/todo.txt'));
  });

  test('the archive is uploaded to artifacts/{sha}.tar.gz only when absent', async () => {
    const repo = makeRepo();
    const snap = await codeSnapshot(repo, GIT);
    const file = await archive(repo, snap.sha);
    const bucket = new MemoryBucket();
    const first = await uploadArtifact(new MemoryResultStore(bucket, 'f1'), snap.sha, file);
    assert.deepEqual(first, { key: `artifacts/${snap.sha}.tar.gz`, stored: true });
    assert.deepEqual(bucket.objects.get(first.key), new Uint8Array(readFileSync(file)));
    const again = await uploadArtifact(new MemoryResultStore(bucket, 'f2'), snap.sha, file);
    assert.equal(again.stored, false, 'another fleet at the same SHA reuses the artifact');
  });

  test('a folder outside any checkout is a usage error', async () => {
    const dir = tempDir('code-none');
    await assert.rejects(codeSnapshot(dir, GIT), (e: Error) => e.name === 'ConfigError' && /not inside a git checkout/.test(e.message));
  });
});
