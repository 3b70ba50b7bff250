/**
 * Exec round trip through ct's SSH sandbox versus a fresh `ssh host docker exec ...` per call,
 * on loopback (a local sshd in front of this machine's Docker), measured side by side in one run.
 *
 *   node dist/bench/ssh-exec.js [--quick]
 *
 * Prints a markdown table (median and p95 per path, ratio to the fresh-ssh baseline) and the
 * configuration that produced it. Target: ct's path at or below 0.3x the baseline. Two more rows
 * put the channel's SSH figure in context: the same container's channel reached without SSH
 * (what the call costs inside the host), and the SSH round trip itself (a line echoed by `cat`
 * on a channel of the same connection), so ssh minus local is what SSH adds to a call.
 */
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../src/config/config.js';
import { LocalRunner } from '../src/host/local-runner.js';
import { DockerCli } from '../src/sandbox/docker/docker-cli.js';
import { ContainerSandbox } from '../src/sandbox/docker/container-sandbox.js';
import { RunRegistry, newRunId } from '../src/sandbox/run-registry.js';
import { createSshProvider, type SshDockerProvider } from '../src/sandbox/ssh/ssh-provider.js';
import type { SampleSandboxes, Sandbox } from '../src/sandbox/types.js';
import { FIXTURES } from '../test/helpers/paths.js';
import { startSshd, type Sshd } from '../test/helpers/sshd.js';

const quick = process.argv.includes('--quick');
const ITERATIONS = quick ? 15 : 60;
const WARMUP = 3;
const ENV = { name: 'conformance', composeFile: join(FIXTURES, 'conformance', 'compose.yml') };

function stats(ms: number[]): { median: number; p95: number } {
  const s = [...ms].sort((a, b) => a - b);
  const at = (q: number) => s[Math.min(s.length - 1, Math.ceil(q * s.length) - 1)]!;
  return { median: at(0.5), p95: at(0.95) };
}

async function time(fn: () => Promise<unknown>): Promise<number[]> {
  for (let i = 0; i < WARMUP; i++) await fn();
  const out: number[] = [];
  for (let i = 0; i < ITERATIONS; i++) {
    const t = process.hrtime.bigint();
    await fn();
    out.push(Number(process.hrtime.bigint() - t) / 1e6);
  }
  return out;
}

function freshSsh(sshd: Sshd, argv: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      'ssh',
      ['-p', String(sshd.port), '-i', sshd.clientKeyFile, '-o', 'BatchMode=yes', '-o', 'StrictHostKeyChecking=no',
        '-o', 'UserKnownHostsFile=/dev/null', '-o', 'LogLevel=ERROR', `${sshd.user}@${sshd.host}`, ...argv],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
    let err = '';
    child.stderr.on('data', (c: Buffer) => (err += c));
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve() : reject(new Error(`ssh exited ${code}: ${err}`))));
  });
}

async function providerFor(sshd: Sshd, state: string, execChannel: boolean): Promise<{ provider: SshDockerProvider; sandboxes: SampleSandboxes; sb: Sandbox }> {
  const config = loadConfig({ cwd: state, env: { CT_STATE_DIR: state, CT_SSH_KEY: sshd.clientKeyFile, CT_EXEC_CHANNEL: String(execChannel) } });
  const runId = newRunId();
  const registry = new RunRegistry(state);
  registry.register(runId);
  const provider = createSshProvider(`ssh://${sshd.user}@${sshd.host}:${sshd.port}`, { config, runId, registry });
  await provider.preflight();
  await provider.taskInit(ENV);
  const sandboxes = await provider.sampleInit(ENV, { label: `bench-${execChannel ? 'channel' : 'exec'}` });
  return { provider, sandboxes, sb: sandboxes.get('default')! };
}

async function main(): Promise<void> {
  const sshd = await startSshd();
  const state = mkdtempSync(join(tmpdir(), 'ct-bench-ssh-'));
  const setups: Array<Awaited<ReturnType<typeof providerFor>>> = [];
  try {
    const withChannel = await providerFor(sshd, state, true);
    setups.push(withChannel);
    const withoutChannel = await providerFor(sshd, state, false);
    setups.push(withoutChannel);
    const container = (withChannel.sb as ContainerSandbox).containerId;

    const rows: Array<[string, number[]]> = [];
    rows.push(['fresh `ssh host docker exec <c> true` per call (baseline)', await time(() => freshSsh(sshd, ['docker', 'exec', container, 'true']))]);
    rows.push(['ct ssh sandbox, exec channel (default)', await time(() => withChannel.sb.exec(['true']))]);
    rows.push(['ct ssh sandbox, `docker exec` per call on the shared connection', await time(() => withoutChannel.sb.exec(['true']))]);
    const local = new ContainerSandbox(new DockerCli(new LocalRunner()), container, 'default');
    try {
      rows.push(['same container, local exec channel (no ssh)', await time(() => local.exec(['true']))]);
    } finally {
      await local.close();
    }
    const cat = await withChannel.provider.runner.start(['cat']);
    try {
      rows.push([
        'ssh round trip: a line echoed by `cat` on the same connection',
        await time(
          () =>
            new Promise<void>((resolve) => {
              cat.stdout.once('data', () => resolve());
              cat.stdin.write('x\n');
            }),
        ),
      ]);
    } finally {
      cat.stdin.end();
      cat.kill();
    }

    const base = stats(rows[0]![1]).median;
    const sshVersion = spawnSync('ssh', ['-V'], { encoding: 'utf8' }).stderr.trim().split(',')[0];
    const docker = execFileSync('docker', ['version', '--format', '{{.Server.Version}}']).toString().trim();
    const lines = [
      `# ssh exec round trip (${quick ? 'quick, ' : ''}${ITERATIONS} calls each after ${WARMUP} warm-up)`,
      '',
      `node ${process.version}, ${sshVersion}, Docker ${docker}, sshd on 127.0.0.1:${sshd.port} (MaxSessions 10), command \`true\` in a debian:bookworm-slim container`,
      '',
      '| path | median ms | p95 ms | ratio (median) |',
      '|---|---:|---:|---:|',
      ...rows.map(([name, ms]) => {
        const s = stats(ms);
        return `| ${name} | ${s.median.toFixed(2)} | ${s.p95.toFixed(2)} | ${(s.median / base).toFixed(3)}x |`;
      }),
      '',
      `SSH adds ${(stats(rows[1]![1]).median - stats(rows[3]![1]).median).toFixed(2)} ms to a channel call (ssh channel minus local channel, medians); the ssh round trip is ${stats(rows[4]![1]).median.toFixed(2)} ms.`,
      '',
    ];
    process.stdout.write(lines.join('\n'));
  } finally {
    for (const s of setups) {
      await s.provider.sampleCleanup(s.sandboxes).catch(() => {});
      await s.provider.close().catch(() => {});
    }
    await sshd.stop();
    rmSync(state, { recursive: true, force: true });
  }
}

main().catch((e) => {
  process.stderr.write(`${(e as Error).stack ?? e}\n`);
  process.exitCode = 1;
});
