/**
 * Section 3: exec latency on a "remote" Docker host (this machine behind a loopback sshd):
 * ct's SSH sandbox (`--sandbox ssh://user@127.0.0.1:PORT`) against a per-call
 * `ssh host docker exec` (a new SSH connection each call) and against the same over one
 * reused OpenSSH connection (ControlMaster).
 */
import { execFileSync, spawn } from 'node:child_process';
import { copyFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { readLogs } from './eval-logs.js';
import { sshdUnavailable, startLoopbackSshd, type LoopbackSshd } from './loopback-sshd.js';
import { CT_BIN, runCt } from './orchestrators.js';
import { docker } from './raw-docker.js';
import type { Row } from './report.js';
import { median, p95 } from './stats.js';
import type { Workspace } from './workspace.js';

export const REMOTE_METRICS = [
  'exec (`echo`) median, ms',
  'exec (`echo`) p95, ms',
  'exec (`echo`) median, raw over one reused SSH connection, ms',
] as const;

export interface RemoteOptions {
  calls: number;
  reps: number;
  log: (line: string) => void;
}

export function remoteConfig(o: RemoteOptions): string {
  return `loopback sshd, 1 service, ${o.calls} × \`echo\``;
}

function ssh(args: string[]): Promise<number> {
  return new Promise((resolve, reject) => {
    const t = performance.now();
    const child = spawn('ssh', args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let err = '';
    child.stdout.resume();
    child.stderr.on('data', (d) => (err += d));
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve(performance.now() - t) : reject(new Error(`ssh ${args.at(-1)} failed (${code}): ${err.trim()}`))));
  });
}

/** Flags ct's CLI offers for SSH keys, read from its help (the option may not exist yet). */
function ctHasSshKeyFlag(): boolean {
  return execFileSync(process.execPath, [CT_BIN, 'run', 'eval', '--help'], { encoding: 'utf8' }).includes('--ssh-key');
}

function skipped(o: RemoteOptions, why: string, raw?: { perCall: number[][]; reused: number[][] }): Row[] {
  return REMOTE_METRICS.map((metric, i) => ({
    section: 'remote (SSH)',
    config: remoteConfig(o),
    metric,
    values: raw ? { raw: (i === 0 ? raw.perCall.map(median) : i === 1 ? raw.perCall.map(p95) : raw.reused.map(median)) } : {},
    text: { ct: `skipped: ${why}` },
  }));
}

export async function remoteSection(ws: Workspace, o: RemoteOptions): Promise<{ rows: Row[]; note?: string }> {
  const missing = sshdUnavailable();
  if (missing) return { rows: skipped(o, missing), note: `remote section skipped: ${missing}` };
  let sshd: LoopbackSshd;
  try {
    sshd = await startLoopbackSshd(join(ws.dir, 'sshd'));
  } catch (e) {
    const why = (e as Error).message.split('\n')[0]!;
    return { rows: skipped(o, why), note: `remote section skipped: ${why}` };
  }
  const target = `${sshd.user}@${sshd.host}`;
  const control = ['-o', 'ControlMaster=auto', '-o', `ControlPath=${join(ws.dir, 'sshd', 'cm-%p')}`, '-o', 'ControlPersist=300'];
  const container = (await docker(['run', '-d', '--init', 'debian:bookworm-slim', 'sleep', 'infinity'])).stdout.trim();
  const remoteCmd = `docker exec ${container} bash -c 'echo hi'`;
  const traj = ws.trajectory(o.calls, 'exec');
  const env = ws.envs[0]!;
  const ctArgs = [`--sandbox`, `ssh://${target}:${sshd.port}`, ...(ctHasSshKeyFlag() ? ['--ssh-key', sshd.keyFile] : [])];
  // Without --ssh-key ct looks for ~/.ssh/id_ed25519: give it a home holding the bench key.
  const ctEnv = ctArgs.includes('--ssh-key') ? {} : { HOME: join(ws.dir, 'sshd', 'home') };
  if (!ctArgs.includes('--ssh-key')) {
    mkdirSync(join(ws.dir, 'sshd', 'home', '.ssh'), { recursive: true, mode: 0o700 });
    copyFileSync(sshd.keyFile, join(ws.dir, 'sshd', 'home', '.ssh', 'id_ed25519'));
  }
  const perCall: number[][] = [];
  const reused: number[][] = [];
  const ctCalls: number[][] = [];
  let ctProblem: string | undefined;
  try {
    await ssh([...sshd.sshOptions, ...control, target, 'true']);
    for (let rep = 0; rep < o.reps; rep++) {
      const a: number[] = [];
      const b: number[] = [];
      for (let i = 0; i < o.calls; i++) a.push(await ssh([...sshd.sshOptions, target, remoteCmd]));
      for (let i = 0; i < o.calls; i++) b.push(await ssh([...sshd.sshOptions, ...control, target, remoteCmd]));
      perCall.push(a);
      reused.push(b);
      if (!ctProblem) {
        try {
          const run = await runCt(ws, { env, trajectory: traj, samples: 1, concurrency: 1, logDir: ws.logDir(`ssh-ct`) }, ctArgs, ctEnv);
          const [log] = await readLogs([run.logPath], 'full');
          ctCalls.push(log!.samples[0]!.tools.map((t) => t.seconds * 1000));
        } catch (e) {
          const msg = (e as Error).message;
          ctProblem = /unknown sandbox/.test(msg) ? 'ct has no ssh:// sandbox in this build' : `ct over SSH failed: ${msg.split('\n').slice(-1)[0]!.slice(0, 120)}`;
        }
      }
      o.log(`  remote: repetition ${rep + 1}/${o.reps} done`);
    }
  } finally {
    await ssh([...sshd.sshOptions, ...control, '-O', 'exit', target]).catch(() => 0);
    await docker(['rm', '--force', container]);
    await sshd.stop();
  }
  if (ctProblem) return { rows: skipped(o, ctProblem, { perCall, reused }), note: `remote section: ${ctProblem}` };
  const config = remoteConfig(o);
  return {
    rows: [
      { section: 'remote (SSH)', config, metric: REMOTE_METRICS[0], values: { ct: ctCalls.map(median), raw: perCall.map(median) } },
      { section: 'remote (SSH)', config, metric: REMOTE_METRICS[1], values: { ct: ctCalls.map(p95), raw: perCall.map(p95) } },
      { section: 'remote (SSH)', config, metric: REMOTE_METRICS[2], values: { ct: ctCalls.map(median), raw: reused.map(median) } },
    ],
  };
}
