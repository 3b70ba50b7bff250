/**
 * How `ct sandbox serve` reads an Inspect sandbox config, as Inspect's docker sandbox does: a
 * compose file as is, a Dockerfile as a generated one-service compose file, nothing as the
 * working directory's compose file or Dockerfile, else Inspect's default image; remote hosts
 * refused with a clear message.
 */
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { parse } from 'yaml';
import { ConfigError } from '../../src/errors.js';
import { composeFileFor, DEFAULT_IMAGE } from '../../src/sandbox/serve/inspect-config.js';

describe('ct sandbox serve: Inspect sandbox configs', () => {
  const root = mkdtempSync(join(tmpdir(), 'ct-inspect-config-'));
  const gen = join(root, 'generated');
  after(() => rmSync(root, { recursive: true, force: true }));

  const folder = (name: string, files: Record<string, string>) => {
    const d = join(root, name);
    mkdirSync(d, { recursive: true });
    for (const [f, text] of Object.entries(files)) writeFileSync(join(d, f), text);
    return d;
  };
  const services = (file: string) => parse(readFileSync(file, 'utf8')).services as Record<string, Record<string, unknown>>;

  test('a compose file is used as it is, relative to the working directory', () => {
    const d = folder('compose', { 'env.yaml': 'services: {}\n' });
    assert.equal(composeFileFor('env.yaml', d, gen), join(d, 'env.yaml'));
  });

  test('a Dockerfile becomes one default service built from its folder, under a stable image name', () => {
    const d = folder('dockerfile', { Dockerfile: 'FROM scratch\n' });
    const file = composeFileFor('Dockerfile', d, gen);
    const svc = services(file).default!;
    assert.deepEqual(svc.build, { context: d, dockerfile: 'Dockerfile' });
    assert.match(String(svc.image), /^ct-inspect-[0-9a-f]{12}$/);
    assert.equal(svc.command, 'tail -f /dev/null');
    assert.equal(composeFileFor(join(d, 'Dockerfile'), '/', gen), file, 'the same Dockerfile, the same file');
  });

  test('no config: the folder compose file, else its Dockerfile, else the default image', () => {
    const withCompose = folder('none-compose', { 'compose.yaml': 'services: {}\n', Dockerfile: 'FROM scratch\n' });
    assert.equal(composeFileFor(undefined, withCompose, gen), join(withCompose, 'compose.yaml'));
    const withDockerfile = folder('none-dockerfile', { Dockerfile: 'FROM scratch\n' });
    assert.equal(services(composeFileFor(undefined, withDockerfile, gen)).default!.build !== undefined, true);
    const empty = folder('none', {});
    assert.equal(services(composeFileFor(undefined, empty, gen)).default!.image, DEFAULT_IMAGE);
  });

  test('remote hosts and missing files are refused with a clear message', () => {
    for (const c of ['ssh://ubuntu@box', 'ec2']) assert.throws(() => composeFileFor(c, root, gen), (e: unknown) => e instanceof ConfigError && /does not support remote hosts yet/.test(e.message));
    assert.throws(() => composeFileFor('nope.yaml', root, gen), /does not exist/);
  });
});
