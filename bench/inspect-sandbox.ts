/**
 * Inspect AI's own docker sandbox vs ct's engine inside Inspect (`--sandbox ct`, the inspect-ct
 * plugin), side by side in one run on the same compose file:
 *   - a tool-heavy task (SAMPLES samples, each CALLS sandbox calls: execs, file writes and
 *     reads), run with `inspect eval --sandbox docker:...` and `--sandbox ct:...`: per-call exec
 *     latency (median), sample init + cleanup (median per sample), whole eval wall time;
 *   - Inspect's sandbox self-check suite (integrations/inspect/scripts/self_check.py): wall time
 *     and checks passed for each.
 *   - a warm `echo` on one sample's sandbox, called in sequence (no other sample running):
 *     the latency of one call alone.
 * Targets (issue 32): exec <= 0.05x, init + cleanup <= 0.7x, eval <= 0.5x.
 * Usage: node dist/bench/inspect-sandbox.js [--quick] [--no-self-check]
 */
import { execFileSync, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { fmt, median, table } from './stats.js';

const REPO = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const PLUGIN = join(REPO, 'integrations', 'inspect');
const quick = process.argv.includes('--quick');
const selfCheck = !process.argv.includes('--no-self-check');
const SAMPLES = quick ? 2 : 4;
const EXECS = quick ? 15 : 30;
const FILES = quick ? 5 : 10;
const IMAGE = 'debian:bookworm-slim';

const COMPOSE = `services:
  default:
    image: ${IMAGE}
    command: tail -f /dev/null
    init: true
    stop_grace_period: 1s
`;

/** The task: each sample's solver makes its calls and appends their timings to BENCH_OUT. */
const TASK = `import json, os, time
from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.scorer import CORRECT, Score, accuracy, scorer
from inspect_ai.solver import solver
from inspect_ai.util import sandbox
from inspect_ai.util._sandbox.registry import registry_find_sandboxenv
from inspect_ai._util.entrypoints import ensure_entry_points

_MIN = os.environ.get("INSPECT_CT_MIN_DOCKER_ENGINE")
if _MIN:
    import inspect_ai.util._sandbox.docker.docker as _docker
    import inspect_ai.util._sandbox.docker.prereqs as _prereqs

    async def _validate():
        await _prereqs.validate_docker_engine(version=_MIN)
        await _prereqs.validate_docker_compose()

    _docker.validate_prereqs = _validate

OUT = os.environ["BENCH_OUT"]


def _log(row):
    with open(OUT, "a") as f:
        f.write(json.dumps(row) + "\\n")


def _timed(cls, name):
    fn = getattr(cls, name).__func__

    async def wrapper(c, *args, **kwargs):
        t0 = time.monotonic()
        try:
            return await fn(c, *args, **kwargs)
        finally:
            _log({"phase": name, "seconds": time.monotonic() - t0})

    setattr(cls, name, classmethod(wrapper))


ensure_entry_points()
for _name in ("docker", "ct"):
    _cls = registry_find_sandboxenv(_name)
    _timed(_cls, "sample_init")
    _timed(_cls, "sample_cleanup")


@solver
def tools(execs: int, files: int):
    async def solve(state, generate):
        sb = sandbox()
        for i in range(execs):
            t0 = time.monotonic()
            r = await sb.exec(["sh", "-c", f"echo call {i}; ls / > /dev/null"])
            _log({"call": "exec", "seconds": time.monotonic() - t0})
            assert r.success, r.stderr
        for i in range(files):
            t0 = time.monotonic()
            await sb.write_file(f"/tmp/bench/{i}.txt", "x" * 4096)
            _log({"call": "write", "seconds": time.monotonic() - t0})
            t0 = time.monotonic()
            await sb.read_file(f"/tmp/bench/{i}.txt")
            _log({"call": "read", "seconds": time.monotonic() - t0})
        return state

    return solve


@scorer(metrics=[accuracy()])
def ok():
    async def score(state, target):
        r = await sandbox().exec(["sh", "-c", "ls /tmp/bench | wc -l"])
        return Score(value=CORRECT if r.success else 0)

    return score


@task
def bench(execs: int = 30, files: int = 10, samples: int = 4):
    return Task(dataset=[Sample(id=i, input="go") for i in range(samples)], solver=tools(execs, files), scorer=ok())
`;

/** One sample; WARM sequential echos after 10 unmeasured ones; prints {"median", "p90"} in ms. */
const WARM = `import anyio, json, os, statistics, sys, time
from inspect_ai._util.entrypoints import ensure_entry_points
from inspect_ai.util._sandbox.registry import registry_find_sandboxenv
import task  # noqa: F401 - relaxes Inspect's Docker Engine check where needed

async def main(name, n):
    ensure_entry_points()
    cls = registry_find_sandboxenv(name)
    cfg = os.path.abspath("compose.yaml")
    await cls.task_init("warm", cfg)
    envs = await cls.sample_init("warm", cfg, {})
    env = envs["default"]
    try:
        xs = []
        for i in range(10 + n):
            t0 = time.monotonic()
            await env.exec(["echo", "hi"])
            xs.append((time.monotonic() - t0) * 1000)
        xs = sorted(xs[10:])
        print(json.dumps({"median": statistics.median(xs), "p90": xs[int(0.9 * len(xs))]}))
    finally:
        await cls.sample_cleanup("warm", cfg, envs, False)
        await cls.task_cleanup("warm", cfg, True)

anyio.run(main, sys.argv[1], int(sys.argv[2]))
`;

interface EvalNumbers {
  wall: number;
  exec: number;
  write: number;
  read: number;
  initCleanup: number;
}

function run(cmd: string, args: string[], options: { cwd: string; env: NodeJS.ProcessEnv }): Promise<{ code: number; out: string; seconds: number }> {
  const t0 = performance.now();
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { ...options, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    child.on('close', (code) => resolve({ code: code ?? 1, out, seconds: (performance.now() - t0) / 1000 }));
  });
}

async function evalWith(sandbox: 'docker' | 'ct', dir: string, env: NodeJS.ProcessEnv): Promise<EvalNumbers> {
  const out = join(dir, `${sandbox}.jsonl`);
  rmSync(out, { force: true });
  const r = await run(
    'python3',
    [
      '-m', 'inspect_ai', 'eval', 'task.py', '--model', 'mockllm/model', '--sandbox', `${sandbox}:compose.yaml`,
      '-T', `execs=${EXECS}`, '-T', `files=${FILES}`, '-T', `samples=${SAMPLES}`, '--log-dir', join(dir, `logs-${sandbox}`),
    ],
    { cwd: dir, env: { ...env, BENCH_OUT: out } },
  );
  if (r.code !== 0) throw new Error(`inspect eval --sandbox ${sandbox} failed:\n${r.out.slice(-3000)}`);
  const rows = readFileSync(out, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { call?: string; phase?: string; seconds: number });
  const ms = (f: (x: (typeof rows)[number]) => boolean) => rows.filter(f).map((x) => x.seconds * 1000);
  const inits = ms((x) => x.phase === 'sample_init');
  const cleanups = ms((x) => x.phase === 'sample_cleanup');
  return {
    wall: r.seconds,
    exec: median(ms((x) => x.call === 'exec')),
    write: median(ms((x) => x.call === 'write')),
    read: median(ms((x) => x.call === 'read')),
    initCleanup: median(inits) + median(cleanups),
  };
}

async function warmEcho(sandbox: 'docker' | 'ct', dir: string, env: NodeJS.ProcessEnv): Promise<{ median: number; p90: number }> {
  const r = await run('python3', ['warm.py', sandbox, String(quick ? 30 : 100)], { cwd: dir, env: { ...env, BENCH_OUT: join(dir, 'warm.jsonl') } });
  if (r.code !== 0) throw new Error(`warm echo with ${sandbox} failed:\n${r.out.slice(-3000)}`);
  return JSON.parse(r.out.trim().split('\n').at(-1)!) as { median: number; p90: number };
}

async function selfCheckWith(sandbox: 'docker' | 'ct', dir: string, env: NodeJS.ProcessEnv): Promise<{ seconds: number; passed: number; total: number }> {
  const r = await run('python3', [join(PLUGIN, 'scripts', 'self_check.py'), sandbox, 'compose.yaml'], { cwd: dir, env });
  if (r.code !== 0) throw new Error(`self-check for ${sandbox} failed:\n${r.out.slice(-3000)}`);
  const j = JSON.parse(r.out.trim().split('\n').at(-1)!) as { passed: string[]; failed: Record<string, string> };
  return { seconds: r.seconds, passed: j.passed.length, total: j.passed.length + Object.keys(j.failed).length };
}

/** The plugin on PYTHONPATH with its entry point (as the test does): nothing installed. */
function pluginEnv(dir: string): NodeJS.ProcessEnv {
  const pyproject = readFileSync(join(PLUGIN, 'pyproject.toml'), 'utf8');
  const version = /^version = "([^"]+)"/m.exec(pyproject)![1]!;
  const info = join(dir, 'site', `inspect_ct-${version}.dist-info`);
  mkdirSync(info, { recursive: true });
  writeFileSync(join(info, 'METADATA'), `Metadata-Version: 2.1\nName: inspect-ct\nVersion: ${version}\n`);
  writeFileSync(join(info, 'entry_points.txt'), '[inspect_ai]\nct = inspect_ct._registry\n');
  const engine = execFileSync('docker', ['version', '--format', '{{.Server.Version}}'], { encoding: 'utf8' }).trim();
  const [maj, min] = engine.split('.').map(Number);
  const old = maj! < 24 || (maj === 24 && min === 0);
  return {
    ...process.env,
    PYTHONPATH: [join(dir, 'site'), join(PLUGIN, 'src'), process.env.PYTHONPATH].filter(Boolean).join(':'),
    CT_BIN: process.env.CT_BIN ?? join(REPO, 'bin', 'ct.js'),
    CT_STATE_DIR: join(dir, 'state'),
    INSPECT_DISPLAY: 'plain',
    ...(old && { INSPECT_CT_MIN_DOCKER_ENGINE: engine }),
  };
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'ct-bench-inspect-'));
  try {
    writeFileSync(join(dir, 'compose.yaml'), COMPOSE);
    writeFileSync(join(dir, 'task.py'), TASK);
    writeFileSync(join(dir, 'warm.py'), WARM);
    const env = pluginEnv(dir);
    console.log(
      `inspect-sandbox bench: ${SAMPLES} samples x (${EXECS} exec + ${FILES} write + ${FILES} read), image ${IMAGE}, ` +
        `${cpus().length} CPUs, Docker ${env.INSPECT_CT_MIN_DOCKER_ENGINE ?? 'engine (current)'}; one eval each, docker first`,
    );
    const docker = await evalWith('docker', dir, env);
    const ct = await evalWith('ct', dir, env);
    const warmDocker = await warmEcho('docker', dir, env);
    const warmCt = await warmEcho('ct', dir, env);
    const ratio = (a: number, b: number) => `${(a / b).toFixed(3)}x`;
    console.log(
      table(
        ['', 'docker', 'ct', 'ct / docker', 'target'],
        [
          ['warm echo, one sample alone (median ms)', fmt(warmDocker.median), fmt(warmCt.median), ratio(warmCt.median, warmDocker.median), '<= 0.05x'],
          ['warm echo, one sample alone (p90 ms)', fmt(warmDocker.p90), fmt(warmCt.p90), ratio(warmCt.p90, warmDocker.p90), ''],
          [`exec in the eval, ${SAMPLES} samples at once (median ms)`, fmt(docker.exec), fmt(ct.exec), ratio(ct.exec, docker.exec), '<= 0.05x'],
          ['write_file (median ms)', fmt(docker.write), fmt(ct.write), ratio(ct.write, docker.write), ''],
          ['read_file (median ms)', fmt(docker.read), fmt(ct.read), ratio(ct.read, docker.read), ''],
          ['sample init + cleanup (median ms)', fmt(docker.initCleanup), fmt(ct.initCleanup), ratio(ct.initCleanup, docker.initCleanup), '<= 0.7x'],
          ['whole eval (s)', docker.wall.toFixed(1), ct.wall.toFixed(1), ratio(ct.wall, docker.wall), '<= 0.5x'],
        ],
      ),
    );
    if (selfCheck) {
      const d = await selfCheckWith('docker', dir, env);
      const c = await selfCheckWith('ct', dir, env);
      console.log(
        table(
          ['self-check suite', 'docker', 'ct', 'ct / docker'],
          [
            ['wall time (s)', d.seconds.toFixed(1), c.seconds.toFixed(1), ratio(c.seconds, d.seconds)],
            ['checks passed (root)', `${d.passed}/${d.total}`, `${c.passed}/${c.total}`, ''],
          ],
        ),
      );
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((e: unknown) => {
  console.error(e);
  process.exitCode = 1;
});
