/**
 * The README's commands for fleet workers on other machines (its block with `--workers
 * external`), run as written from the set-up of its "Running evals" section
 * (CT_SETTINGS_DIR=examples/settings), against moto_server. Without the block's set-up the run
 * stops with exit 2 naming what registers a setting; with it the controller pins the setting and
 * prints the worker command the README shows (its fleet id aside). The README's GitHub URL
 * reaches a local repository holding examples/settings/demo through git's `insteadOf`
 * (GIT_CONFIG_* in the environment). The run is asked for its estimate (it creates nothing), then
 * started with --yes (no terminal here to confirm) until it prints the worker command; workers
 * themselves are fleet-external-secrets.test.ts's and fleet-settings-pull.test.ts's.
 */
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { EXAMPLE_SETTINGS, finished, runCt, startCt, waitForOutput } from '../helpers/cli.js';
import { fencedBlocks, runShellSteps, shellCommands, type StepResult } from '../helpers/doc-commands.js';
import { FAKE_AWS } from '../helpers/fleet.js';
import { startMoto, type Moto } from '../helpers/moto.js';
import { CT_BIN, REPO_ROOT } from '../helpers/paths.js';
import { SettingRepo, git, isolatedEnv } from '../settings/helpers/git-fixtures.js';

const README = readFileSync(join(REPO_ROOT, 'README.md'), 'utf8');
const BLOCK = fencedBlocks(README).find((b) => b.text.includes('--workers external'));
const COMMANDS = BLOCK ? shellCommands(BLOCK.text) : [];
const RUN = COMMANDS.find((c) => /^ct run eval --fleet --workers external /.test(c));
const WORKER = COMMANDS.find((c) => /^ct fleet worker /.test(c));
/** A command without its comment. */
const bare = (c: string) => c.replace(/\s+#.*$/, '');
/** ...as arguments of ct. */
const argsOf = (c: string) => bare(c).split(/\s+/).slice(1);

describe("the README's commands for external workers", () => {
  let moto: Moto;
  let base: string;
  let project: string;
  let env: NodeJS.ProcessEnv;
  let setting: SettingRepo;

  before(async () => {
    moto = await startMoto();
    base = mkdtempSync(join(tmpdir(), 'ct-readme-fleet-'));
    project = join(base, 'project');
    mkdirSync(project);
    const bin = join(base, 'bin');
    mkdirSync(bin);
    writeFileSync(join(bin, 'ct'), `#!/bin/sh\nexec "${process.execPath}" "${CT_BIN}" "$@"\n`, { mode: 0o755 });
    setting = new SettingRepo(base, 'demo-setting');
    const url = COMMANDS.find((c) => c.startsWith('ct settings add '))?.split(/\s+/)[4] ?? '';
    env = isolatedEnv({
      ...FAKE_AWS,
      PATH: `${bin}:${process.env.PATH}`,
      AWS_ENDPOINT_URL: moto.url,
      CT_SETTINGS_DIR: EXAMPLE_SETTINGS,
      CT_STATE_DIR: join(base, 'state'),
      GIT_CONFIG_COUNT: '1',
      GIT_CONFIG_KEY_0: `url.${setting.bare}.insteadOf`,
      GIT_CONFIG_VALUE_0: url,
      NO_COLOR: '1',
    });
    delete env.AWS_PROFILE;
  });
  after(async () => {
    await moto?.stop();
    if (base) rmSync(base, { recursive: true, force: true });
  });

  test('the block: set-up, the run and the worker command', () => {
    assert.ok(BLOCK, 'a README block with --workers external');
    assert.deepEqual(
      COMMANDS.map((c) => bare(c).split(/\s+/).slice(0, 3).join(' ')),
      ['unset CT_SETTINGS_DIR', 'ct settings add', 'ct settings pull', 'ct run eval', 'ct fleet worker'],
    );
    assert.ok(RUN && WORKER);
  });

  test('with only the examples\' settings folder, the run stops with exit 2 naming what registers a setting', async () => {
    const r = await runCt([...argsOf(RUN!), '--estimate'], { cwd: project, env });
    assert.equal(r.code, 2, r.stdout + r.stderr);
    assert.match(r.stderr, /external and EC2 workers pull every setting of the run from git.*setting demo is only a folder here .*examples\/settings\/demo\), not registered as a git repository/);
    assert.match(r.stderr, /`ct settings add demo <git URL or path of its repository>`, then `ct settings pull demo`/);
  });

  test('after the set-up the controller pins the setting and prints the worker command the README shows', async () => {
    // The set-up as written, then the run's estimate (which creates nothing), in one shell.
    const commands = COMMANDS.filter((c) => c !== WORKER).map((c) => (c === RUN ? `${bare(c)} --estimate` : c));
    const steps: StepResult[] = await runShellSteps(commands, { cwd: project, env, dir: join(base, 'steps'), timeoutMs: 180_000 });
    const failed = steps.find((s) => s.code !== 0);
    assert.equal(failed, undefined, failed && `${failed.command}: exit ${failed.code}\n${failed.stdout}\n${failed.stderr}`);
    assert.equal(steps.length, commands.length);
    assert.match(readFileSync(join(project, 'ct.config.yml'), 'utf8'), /demo:\n\s+repo: https:\/\/github\.com\/ORG\/demo-setting\.git/);
    assert.match(readFileSync(join(project, '.settings.lock.yml'), 'utf8'), new RegExp(`commit: ${git(setting.work, 'rev-parse', 'HEAD')}`));
    const estimate = steps.at(-1)!;
    assert.match(estimate.stdout + estimate.stderr, /fleet [0-9a-f]{16}: 80 job\(s\), 0 already finished, 80 to run/);

    // The run itself (with --yes: no terminal here) prints the worker command.
    const runEnv = { ...env };
    delete runEnv.CT_SETTINGS_DIR;
    const child = startCt([...argsOf(RUN!), '--yes'], { cwd: project, env: runEnv });
    const done = finished(child);
    let printed: string;
    try {
      printed = await waitForOutput(child, (t) => /start workers on your machines with:\n\s+ct fleet worker .*\n/.test(t), 120_000);
    } finally {
      child.kill('SIGINT');
    }
    const killer = setTimeout(() => child.kill('SIGKILL'), 30_000);
    await done;
    clearTimeout(killer);
    const shown = /start workers on your machines with:\n\s+(ct fleet worker .*)\n/.exec(printed)![1]!;
    const id = /--fleet ([0-9a-f]{16})/.exec(shown)![1]!;
    assert.equal(shown, bare(WORKER!).replace(/--fleet [0-9a-f]{16}/, `--fleet ${id}`));
  });
});
