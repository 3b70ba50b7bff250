/**
 * The inspect-ct plugin (integrations/inspect/) inside the real Inspect AI: its sandbox
 * conformance checks as root and as uid 1000, an ordinary `inspect eval --sandbox ct`, and what
 * a killed Inspect leaves (nothing `inspect sandbox cleanup ct` does not remove).
 *
 * The package is put on PYTHONPATH with a hand-made dist-info for its entry point, so nothing is
 * installed into the machine's Python (every Inspect process there would load it).
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { projectsOfState } from '../helpers/ct-projects.js';
import { readWithInspect } from '../helpers/inspect.js';
import { CT_BIN, REPO_ROOT } from '../helpers/paths.js';

const PLUGIN = join(REPO_ROOT, 'integrations', 'inspect');
const PYTHON = process.env.PYTHON ?? 'python3';
const hasInspect = spawnSync(PYTHON, ['-c', 'import inspect_ai'], { stdio: 'ignore' }).status === 0;

/**
 * What Inspect's own docker sandbox fails of these checks here (Inspect 0.3.285, measured with
 * integrations/inspect/scripts/self_check.py on the same compose files): as root, the two
 * write-without-permission checks (root writes anyway); as uid 1000, none. ct must pass the rest.
 */
const DOCKER_FAILS = {
  root: ['test_write_binary_file_without_permissions', 'test_write_text_file_without_permissions'],
  user: [] as string[],
};

const SERVICE = `    image: debian:bookworm-slim
    command: tail -f /dev/null
    init: true
    network_mode: none
    stop_grace_period: 1s
`;

const TASK = `import anyio
from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.scorer import CORRECT, INCORRECT, Score, accuracy, scorer
from inspect_ai.solver import solver
from inspect_ai.util import sandbox


AGENTS = r'for p in /proc/[0-9]*; do tr "\\0" " " < $p/cmdline 2>/dev/null; echo; done | grep -c "[c]t-exec-agent /"'


@solver
def note(wait: float):
    async def solve(state, generate):
        await sandbox().write_file("note.txt", state.metadata["marker"])
        await anyio.sleep(wait)
        return state
    return solve


@scorer(metrics=[accuracy()])
def in_sandbox():
    async def score(state, target):
        r = await sandbox().exec(["sh", "-c", 'echo "$MARKER:$(cat note.txt):$(id -u):$(' + AGENTS + ')"'])
        # One exec channel: Inspect's root probe at the sample's start opened no second one.
        want = f"{state.metadata['marker']}:{state.metadata['marker']}:0:1"
        return Score(value=CORRECT if r.stdout.strip() == want else INCORRECT, answer=r.stdout.strip())
    return score


@task
def tiny(wait: float = 0):
    return Task(
        dataset=[Sample(id=i, input="hi", metadata={"marker": f"m{i}"}) for i in (1, 2)],
        solver=note(wait),
        scorer=in_sandbox(),
    )
`;

describe('inspect-ct: ct as an Inspect AI sandbox', { skip: !hasInspect && 'inspect_ai is not installed for python3' }, () => {
  let dir: string;
  let env: NodeJS.ProcessEnv;

  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'ct-inspect-plugin-'));
    const site = join(dir, 'site');
    writeDistInfo(site);
    mkdirSync(join(dir, 'state'));
    env = {
      ...process.env,
      PYTHONPATH: [site, join(PLUGIN, 'src'), process.env.PYTHONPATH].filter(Boolean).join(':'),
      CT_BIN,
      CT_STATE_DIR: join(dir, 'state'),
      INSPECT_LOG_DIR: join(dir, 'logs'),
      INSPECT_DISPLAY: 'plain',
    };
    writeFileSync(join(dir, 'root.yaml'), `services:\n  default:\n${SERVICE}`);
    writeFileSync(join(dir, 'user.yaml'), `services:\n  default:\n${SERVICE}    user: "1000:1000"\n    working_dir: /tmp\n`);
    writeFileSync(join(dir, 'compose.yaml'), `services:\n  default:\n${SERVICE}    environment:\n      MARKER: \${SAMPLE_METADATA_MARKER}\n`);
    writeFileSync(join(dir, 'task.py'), TASK);
  });

  after(() => {
    // Whatever a failed test left: the state dir's runs are this file's alone.
    spawnSync(PYTHON, ['-m', 'inspect_ai', 'sandbox', 'cleanup', 'ct'], { cwd: dir, env, stdio: 'ignore', timeout: 60_000 });
    // The image built from the Dockerfile test's folder (named after its path: see inspect-config.ts).
    const dockerfile = join(dir, 'dockerfile', 'Dockerfile');
    spawnSync('docker', ['rmi', '-f', `ct-inspect-${createHash('sha256').update(dockerfile).digest('hex').slice(0, 12)}`], { stdio: 'ignore' });
    rmSync(dir, { recursive: true, force: true });
  });

  for (const who of ['root', 'user'] as const) {
    test(`Inspect's sandbox self-check passes at least what its docker sandbox passes (${who === 'root' ? 'root' : 'uid 1000'})`, async () => {
      const out = await run(PYTHON, [join(PLUGIN, 'scripts', 'self_check.py'), 'ct', join(dir, `${who}.yaml`)], { cwd: dir, env }, 240_000);
      const r = JSON.parse(out.trim().split('\n').at(-1)!) as { passed: string[]; failed: Record<string, string> };
      assert.ok(r.passed.length >= 40, `only ${r.passed.length} checks ran`);
      const unexpected = Object.entries(r.failed).filter(([name]) => !DOCKER_FAILS[who].includes(name));
      assert.deepEqual(unexpected, [], 'ct fails checks that Inspect\'s docker sandbox passes');
      assert.ok(r.passed.includes('test_exec_large_command'), 'a ~1 MiB command line runs through the exec channel');
    });
  }

  test('under trio, a cancelled exec dies in the sandbox; a Dockerfile config is built; x-default marks the agent service; ssh and ec2 configs are refused clearly', async () => {
    const work = join(dir, 'dockerfile');
    mkdirSync(work);
    writeFileSync(join(work, 'Dockerfile'), 'FROM debian:bookworm-slim\nRUN echo built > /built.txt\n');
    writeFileSync(join(work, 'driver.py'), CANCEL_DRIVER);
    writeFileSync(join(work, 'x-default.yaml'), `services:\n  helper:\n${SERVICE}  agent:\n    x-default: true\n${SERVICE}`);
    const out = await run(PYTHON, ['driver.py'], { cwd: work, env }, 120_000);
    const r = JSON.parse(out.trim().split('\n').at(-1)!) as Record<string, unknown>;
    assert.equal(r.built, 'built');
    assert.deepEqual(r.services, ['agent', 'helper'], 'the service marked x-default: true comes first');
    assert.deepEqual([r.running, r.after], ['1', '0'], 'the cancelled command ran, then was killed');
    assert.match(String(r.connection), /^docker exec -it ct-[a-z0-9]{8}-\S+ bash -l$/);
    assert.equal((r.remote as string[]).length, 2);
    for (const m of r.remote as string[]) assert.match(m, /does not support remote hosts yet/);
  });

  test('inspect eval --sandbox ct runs an ordinary task; sample metadata reaches compose; one exec channel a sample; nothing is left', async () => {
    const logDir = join(dir, 'logs-eval');
    await run(
      PYTHON,
      ['-m', 'inspect_ai', 'eval', 'task.py', '--model', 'mockllm/model', '--sandbox', 'ct:compose.yaml', '--log-dir', logDir],
      { cwd: dir, env },
      120_000,
    );
    const logs = readdirSync(logDir).filter((f) => f.endsWith('.eval'));
    assert.equal(logs.length, 1);
    const [view] = await readWithInspect([join(logDir, logs[0]!)]);
    assert.equal(view!.status, 'success');
    assert.deepEqual(
      view!.samples.map((s) => [s.id, s.scores.in_sandbox]),
      [
        ['1', 'C'],
        ['2', 'C'],
      ],
    );
    assert.deepEqual(projectsOfState(env.CT_STATE_DIR!), []);
  });

  test('a killed Inspect leaves nothing: ct serve removes its sandboxes, and inspect sandbox cleanup ct what a killed serve left', async () => {
    // Inspect killed alone: its ct process sees its input close and removes the sandboxes.
    const first = startEval(dir, env);
    await waitFor(() => projectsOfState(env.CT_STATE_DIR!).length > 0, 60_000, 'sandboxes to start');
    process.kill(-first.pid!, 'SIGKILL');
    await waitFor(() => projectsOfState(env.CT_STATE_DIR!).length === 0, 60_000, 'ct sandbox serve to remove its sandboxes');

    // Inspect and its ct process both killed: the run's record names a dead pid, and the cleanup removes its sandboxes.
    const second = startEval(dir, env);
    await waitFor(() => projectsOfState(env.CT_STATE_DIR!).length > 0, 60_000, 'sandboxes to start');
    const servePids = readdirSync(join(env.CT_STATE_DIR!, 'runs')).map(
      (f) => (JSON.parse(readFileSync(join(env.CT_STATE_DIR!, 'runs', f), 'utf8')) as { pid: number }).pid,
    );
    process.kill(-second.pid!, 'SIGKILL');
    for (const pid of servePids) killQuietly(pid);
    await new Promise((r) => setTimeout(r, 500));
    const left = projectsOfState(env.CT_STATE_DIR!);
    assert.ok(left.length > 0, 'the killed run left sandboxes');
    const out = await run(PYTHON, ['-m', 'inspect_ai', 'sandbox', 'cleanup', 'ct'], { cwd: dir, env }, 60_000);
    assert.match(out, /ct sandbox project\(s\) removed/);
    assert.deepEqual(projectsOfState(env.CT_STATE_DIR!), []);
  });
});

/** Cancels an exec mid-run (the process must die in the container), on a Dockerfile config, under trio; starts an x-default compose file; tries the remote configs. */
const CANCEL_DRIVER = `import anyio, json
from inspect_ai._util.entrypoints import ensure_entry_points
from inspect_ai.util._sandbox.registry import registry_find_sandboxenv
COUNT = 'for p in /proc/[0-9]*; do tr "\\\\0" " " < $p/cmdline 2>/dev/null; echo; done | grep -c "cancel-marke[r]"'
async def main():
    ensure_entry_points()
    cls = registry_find_sandboxenv("ct")
    out = {"remote": []}
    for cfg in ("ssh://ubuntu@build-box", "ec2"):
        try:
            await cls.task_init("t", cfg)
        except ValueError as ex:
            out["remote"].append(str(ex))
    cfg = "Dockerfile"
    await cls.task_init("t", cfg)
    envs = await cls.sample_init("t", cfg, {})
    env = envs["default"]
    try:
        out["built"] = (await env.read_file("/built.txt")).strip()
        async with anyio.create_task_group() as tg:
            async def long():
                with anyio.move_on_after(1.5):
                    await env.exec(["sh", "-c", "sleep 30 # cancel-marker; :"])
            tg.start_soon(long)
            await anyio.sleep(0.7)
            out["running"] = (await env.exec(["sh", "-c", COUNT])).stdout.strip()
        await anyio.sleep(1)
        out["after"] = (await env.exec(["sh", "-c", COUNT])).stdout.strip()
        out["connection"] = (await env.connection()).command
    finally:
        await cls.sample_cleanup("t", cfg, envs, False)
        await cls.task_cleanup("t", cfg, True)
    cfg = "x-default.yaml"
    await cls.task_init("x", cfg)
    envs = await cls.sample_init("x", cfg, {})
    out["services"] = list(envs)
    await cls.sample_cleanup("x", cfg, envs, False)
    await cls.task_cleanup("x", cfg, True)
    print(json.dumps(out))
anyio.run(main, backend="trio")
`;

/** The package's entry point, as pip would record it, so Inspect finds the `ct` sandbox. */
function writeDistInfo(site: string): void {
  const pyproject = readFileSync(join(PLUGIN, 'pyproject.toml'), 'utf8');
  const version = /^version = "([^"]+)"/m.exec(pyproject)![1]!;
  const entry = /\[project\.entry-points\.inspect_ai\]\n([^[]*)/.exec(pyproject)![1]!.trim().replace(/"/g, '');
  const info = join(site, `inspect_ct-${version}.dist-info`);
  mkdirSync(info, { recursive: true });
  writeFileSync(join(info, 'METADATA'), `Metadata-Version: 2.1\nName: inspect-ct\nVersion: ${version}\n`);
  writeFileSync(join(info, 'entry_points.txt'), `[inspect_ai]\n${entry}\n`);
}

/** An eval whose samples wait in their sandboxes, in a process group of its own. */
function startEval(dir: string, env: NodeJS.ProcessEnv): ChildProcess {
  const child = spawn(
    PYTHON,
    ['-m', 'inspect_ai', 'eval', 'task.py', '--model', 'mockllm/model', '--sandbox', 'ct:compose.yaml', '-T', 'wait=120', '--log-dir', join(dir, 'logs-killed')],
    { cwd: dir, env, stdio: 'ignore', detached: true },
  );
  child.unref();
  return child;
}

function killQuietly(pid: number): void {
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    // Already gone.
  }
}

async function waitFor(cond: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

function run(cmd: string, args: string[], options: { cwd: string; env: NodeJS.ProcessEnv }, timeoutMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { ...options, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('close', (code) => {
      clearTimeout(timer);
      if (code === 0) resolve(stdout);
      else reject(new Error(`${cmd} ${args.join(' ')} exited with ${code}:\n${stderr.slice(-3000)}\n${stdout.slice(-3000)}`));
    });
  });
}

