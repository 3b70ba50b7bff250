import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { git, isolatedEnv, tempDir } from '../../settings/helpers/git-fixtures.js';

/** Git options for ct's code-snapshot calls in tests: no user or system git config. */
export const GIT = { timeoutSeconds: 60, env: isolatedEnv() };

/** A repository with two committed files and a .gitignore (removed by `removeTempDirs`). */
export function makeRepo(): string {
  const repo = tempDir('code');
  git(repo, 'init', '-q', '-b', 'main');
  mkdirSync(join(repo, 'src'));
  writeFileSync(join(repo, 'src', 'a.ts'), 'export const a = 1;\n');
  writeFileSync(join(repo, 'README.md'), '# demo\n');
  writeFileSync(join(repo, '.gitignore'), 'dist/\n');
  git(repo, 'add', '-A');
  git(repo, 'commit', '-q', '-m', 'first');
  return repo;
}
