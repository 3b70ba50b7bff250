/**
 * Runs an orchestrator (ct, inspect) as a child process and measures its wall time and the CPU
 * seconds of its whole process tree. The CPU figure is wait4-style accounting read from
 * /proc/self/stat: a process's `cutime`/`cstime` grow by the user+sys time of each child it
 * reaps, including everything that child reaped in turn (the docker CLI calls it spawned).
 * So the delta around one child, with no other child running, is that child's tree.
 * The Docker Engine's own CPU (dockerd + containerd) is read the same way, from their stat files.
 */
import { spawn } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';

export interface ChildRun {
  code: number | null;
  stdout: string;
  stderr: string;
  wallMs: number;
  /** Epoch milliseconds at spawn and at exit. */
  startedAtMs: number;
  endedAtMs: number;
  /** User + system seconds of the child and its descendants. */
  cpuSeconds: number;
  /** User + system seconds dockerd and containerd spent meanwhile (NaN when not readable). */
  engineCpuSeconds: number;
}

/** Clock ticks per second of /proc times (USER_HZ); 100 on every Linux this runs on. */
const TICKS = 100;

/** [utime, stime, cutime, cstime] in ticks, from /proc/<pid>/stat (fields 14-17). */
function procTimes(pid: number | 'self'): number[] {
  const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const rest = text.slice(text.lastIndexOf(')') + 2).split(' ');
  // rest[0] is field 3 (state); utime is field 14.
  return [11, 12, 13, 14].map((i) => Number(rest[i]));
}

function engineTicks(): number {
  let sum = 0;
  let found = 0;
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const comm = readFileSync(`/proc/${entry}/comm`, 'utf8').trim();
      if (comm !== 'dockerd' && comm !== 'containerd') continue;
      const [u, s] = procTimes(Number(entry));
      sum += u! + s!;
      found++;
    } catch {
      // A process that went away while we looked.
    }
  }
  return found ? sum : NaN;
}

function childTicks(): number {
  const [, , cu, cs] = procTimes('self');
  return cu! + cs!;
}

export interface UsageMark {
  children: number;
  engine: number;
  self: NodeJS.CpuUsage;
}

/** The CPU counters now, to compare against later with usageSince. */
export function usageMark(): UsageMark {
  return { children: childTicks(), engine: engineTicks(), self: process.cpuUsage() };
}

/** CPU seconds since `m`: of reaped children (and their trees), of this process, of the Engine. */
export function usageSince(m: UsageMark): { children: number; self: number; engine: number } {
  const self = process.cpuUsage(m.self);
  return {
    children: (childTicks() - m.children) / TICKS,
    self: (self.user + self.system) / 1e6,
    engine: (engineTicks() - m.engine) / TICKS,
  };
}

export interface RunChildOptions {
  cwd: string;
  env: NodeJS.ProcessEnv;
  /** Killed (SIGKILL) past this; default 30 minutes. */
  timeoutMs?: number;
}

/** Runs argv to the end, collecting output, wall time and CPU usage. */
export function runChild(argv: string[], options: RunChildOptions): Promise<ChildRun> {
  return new Promise((resolve, reject) => {
    const mark = usageMark();
    const startedAtMs = Date.now();
    const t0 = performance.now();
    const child = spawn(argv[0]!, argv.slice(1), { cwd: options.cwd, env: options.env, stdio: ['ignore', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (d: Buffer) => out.push(d));
    child.stderr.on('data', (d: Buffer) => err.push(d));
    const timer = setTimeout(() => child.kill('SIGKILL'), options.timeoutMs ?? 30 * 60_000);
    child.on('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      const wallMs = performance.now() - t0;
      const used = usageSince(mark);
      resolve({
        code,
        stdout: Buffer.concat(out).toString('utf8'),
        stderr: Buffer.concat(err).toString('utf8'),
        wallMs,
        startedAtMs,
        endedAtMs: Date.now(),
        cpuSeconds: used.children,
        engineCpuSeconds: used.engine,
      });
    });
  });
}

/** The last lines of a child's output, for error messages. */
export function tail(text: string, n = 15): string {
  return text.trim().split('\n').slice(-n).join('\n');
}
