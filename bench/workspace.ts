/**
 * The benchmark's scratch folder: a generated settings root with the two environments (one
 * service; three services, one with a healthcheck), a trivial scorer, trajectories, and the
 * Inspect task file that replays the same trajectories through Inspect's docker sandbox.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { benchCalls, ctTrajectory, inspectTrajectory, type CallKind } from './trajectory.js';

export interface BenchEnv {
  /** Environment id in the settings root. */
  id: string;
  /** For tables. */
  label: string;
  composeFile: string;
  /** Services in the compose file. */
  services: number;
}

export interface Trajectory {
  n: number;
  ctFile: string;
  inspectFile: string;
  kinds: CallKind[];
}

export interface Workspace {
  dir: string;
  settingsRoot: string;
  /** CT_STATE_DIR for every ct run of the bench (run registry, known hosts). */
  stateDir: string;
  envs: BenchEnv[];
  inspectTask: string;
  /** The main task every sample runs. */
  mainTask: string;
  trajectory(n: number, only?: CallKind): Trajectory;
  /** A fresh folder for one run's logs. */
  logDir(label: string): string;
  remove(): void;
}

// Every service runs under an init process so SIGTERM stops it at once: `compose down`
// (Inspect's cleanup) would otherwise wait out its 10 s grace on a PID 1 that ignores it.
const ONE_SERVICE = `services:
  default:
    image: debian:bookworm-slim
    command: ["sleep", "infinity"]
    init: true
`;

const THREE_SERVICES = `services:
  default:
    image: debian:bookworm-slim
    command: ["sleep", "infinity"]
    init: true
    depends_on:
      web:
        condition: service_healthy
  web:
    image: busybox:latest
    command: ["httpd", "-f", "-p", "8080", "-h", "/etc"]
    init: true
    healthcheck:
      test: ["CMD", "wget", "-q", "-O", "/dev/null", "http://127.0.0.1:8080/hostname"]
      interval: 1s
      timeout: 2s
      retries: 30
  cache:
    image: busybox:latest
    command: ["sleep", "86400"]
    init: true
`;

const INFO_YML = `name: Replay a scripted trajectory
task_category: add_feature
short_description: Benchmark sample; the replay policy does the work.
scorer_description: Always correct; the scorer only has to run.
coverage: Sandbox and tool-call overhead.
description:
  file: requirements.md
`;

/** A scorer that only has to run: ct copies it into the sandbox and executes it. */
const SCORER = `#!/bin/sh
echo "CORRECT: ok"
`;

/**
 * Replays a trajectory through Inspect's docker sandbox: one Sample, a solver calling
 * sandbox().exec / write_file / read_file and timing each call, and a scorer that copies a
 * script into the sandbox and runs it (as ct's check-script scorer does).
 * BENCH_PHASE_LOG: append the wall-clock span of each sandbox sample_init / sample_cleanup.
 * BENCH_MIN_DOCKER_ENGINE: the Engine version Inspect's prerequisite check accepts (set only
 * when the local Engine is older than Inspect's minimum; the features it uses work on it).
 */
export const INSPECT_TASK = `import json
import os
import time

from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.scorer import CORRECT, INCORRECT, Score, accuracy, scorer
from inspect_ai.solver import solver
from inspect_ai.util import sandbox
import inspect_ai.util._sandbox.docker.docker as _docker
import inspect_ai.util._sandbox.docker.prereqs as _prereqs

_MIN_ENGINE = os.environ.get("BENCH_MIN_DOCKER_ENGINE")
if _MIN_ENGINE:
    async def _validate_prereqs():
        await _prereqs.validate_docker_engine(version=_MIN_ENGINE)
        await _prereqs.validate_docker_compose()

    _docker.validate_prereqs = _validate_prereqs

_PHASES = os.environ.get("BENCH_PHASE_LOG")
if _PHASES:
    _D = _docker.DockerSandboxEnvironment

    def _timed(name, fn):
        async def wrapper(cls, *args, **kwargs):
            t0 = time.time()
            try:
                return await fn(cls, *args, **kwargs)
            finally:
                with open(_PHASES, "a") as f:
                    f.write(json.dumps({"phase": name, "start": t0, "end": time.time()}) + "\\n")

        return classmethod(wrapper)

    _D.sample_init = _timed("init", _D.sample_init.__func__)
    _D.sample_cleanup = _timed("cleanup", _D.sample_cleanup.__func__)


@solver
def replay(trajectory: str):
    with open(trajectory) as f:
        calls = [json.loads(line) for line in f if line.strip()]

    async def solve(state, generate):
        sb = sandbox()
        seconds = []
        for c in calls:
            t0 = time.monotonic()
            if c["kind"] in ("exec", "big"):
                r = await sb.exec(["bash", "-c", c["cmd"]], timeout=180)
                if not r.success:
                    raise RuntimeError(f"{c['cmd']} failed: {r.stderr}")
            elif c["kind"] == "write":
                await sb.write_file(c["path"], c["text"])
            else:
                await sb.read_file(c["path"])
            seconds.append(time.monotonic() - t0)
        state.metadata["bench_call_seconds"] = seconds
        state.metadata["bench_call_kinds"] = [c["kind"] for c in calls]
        return state

    return solve


@scorer(metrics=[accuracy()])
def check():
    async def score(state, target):
        sb = sandbox()
        await sb.write_file("/tmp/bench-check/scorer.sh", "#!/bin/sh\\necho 'CORRECT: ok'\\n")
        r = await sb.exec(["sh", "/tmp/bench-check/scorer.sh"], timeout=120)
        await sb.exec(["rm", "-rf", "/tmp/bench-check"])
        ok = r.success and r.stdout.strip().endswith("CORRECT: ok")
        return Score(value=CORRECT if ok else INCORRECT)

    return score


@task
def bench(compose: str, trajectory: str):
    return Task(
        dataset=[Sample(id="replay", input="Replay the trajectory.")],
        solver=replay(trajectory),
        scorer=check(),
        sandbox=("docker", compose),
    )
`;

/** Creates the workspace under the system temp folder. */
export function createWorkspace(): Workspace {
  const dir = mkdtempSync(join(tmpdir(), 'ct-bench-'));
  const settingsRoot = join(dir, 'settings');
  const mainTask = 'replay';
  const envs: BenchEnv[] = [
    { id: 'one_service', label: '1 service', services: 1, composeFile: '' },
    { id: 'three_services', label: '3 services + healthcheck', services: 3, composeFile: '' },
  ];
  for (const env of envs) {
    const root = join(settingsRoot, 'bench', env.id);
    mkdirSync(join(root, 'codebase'), { recursive: true });
    mkdirSync(join(root, 'docs'), { recursive: true });
    mkdirSync(join(root, 'main_tasks', mainTask), { recursive: true });
    env.composeFile = join(root, 'codebase', 'compose.yml');
    writeFileSync(env.composeFile, env.services === 1 ? ONE_SERVICE : THREE_SERVICES);
    writeFileSync(join(root, 'docs', 'description.md'), 'A Debian machine for benchmarking.\n');
    writeFileSync(join(root, 'main_tasks', mainTask, 'info.yml'), INFO_YML);
    writeFileSync(join(root, 'main_tasks', mainTask, 'requirements.md'), 'Replay the trajectory.\n');
    writeFileSync(join(root, 'main_tasks', mainTask, 'scorer.sh'), SCORER, { mode: 0o755 });
  }
  const inspectTask = join(dir, 'inspect_bench_task.py');
  writeFileSync(inspectTask, INSPECT_TASK);
  const stateDir = join(dir, 'state');
  mkdirSync(stateDir);
  let runs = 0;
  return {
    dir,
    settingsRoot,
    stateDir,
    envs,
    inspectTask,
    mainTask,
    trajectory(n, only) {
      const calls = benchCalls(n, only);
      const name = `traj-${n}${only ? `-${only}` : ''}`;
      const ctFile = join(dir, `${name}.jsonl`);
      const inspectFile = join(dir, `${name}.inspect.jsonl`);
      writeFileSync(ctFile, ctTrajectory(calls));
      writeFileSync(inspectFile, inspectTrajectory(calls));
      return { n, ctFile, inspectFile, kinds: calls.map((c) => c.kind) };
    },
    logDir(label) {
      const d = join(dir, 'logs', `${String(++runs).padStart(4, '0')}-${label}`);
      mkdirSync(d, { recursive: true });
      return d;
    },
    remove() {
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
