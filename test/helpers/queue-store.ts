/**
 * ElasticMQ (SQS) and versitygw (S3) on free loopback ports, as installed by
 * scripts/setup-queue-store.sh into /var/cache/ct-setup/servers (CT_SERVERS_DIR): the queue and
 * store servers a fleet without AWS runs on. Each starts empty, with its data in a temporary
 * folder removed by stop().
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from './sshd.js';

export const SERVERS_DIR = process.env.CT_SERVERS_DIR ?? '/var/cache/ct-setup/servers';

/** versitygw's root keys here (fake: the servers run only on loopback for the test). */
export const STORE_KEYS = { AWS_ACCESS_KEY_ID: 'ctfleettestkey', AWS_SECRET_ACCESS_KEY: 'ctfleettestsecret0123456789', AWS_REGION: 'us-east-1' };

export interface QueueStore {
  sqsUrl: string;
  s3Url: string;
  /** The environment a fleet without AWS needs: the two endpoints and the store's keys, nothing else. */
  env: Record<string, string>;
  stop(): Promise<void>;
}

function missing(what: string): Error {
  return new Error(`${what} is not installed in ${SERVERS_DIR}: run scripts/setup-queue-store.sh (scripts/test.sh does)`);
}

async function waitFor(what: string, child: ChildProcess, log: () => string, probe: () => Promise<boolean>, ms = 60_000): Promise<void> {
  const deadline = Date.now() + ms;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`${what} exited:\n${log()}`);
    if (await probe().catch(() => false)) return;
    if (Date.now() > deadline) throw new Error(`${what} did not start in ${ms / 1000} s:\n${log()}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    child.once('exit', () => resolve());
    child.kill('SIGTERM');
    setTimeout(() => child.kill('SIGKILL'), 5_000).unref();
  });
}

/** Starts both servers (ElasticMQ takes ~5 s, versitygw well under one). */
export async function startQueueStore(): Promise<QueueStore> {
  const cpFile = join(SERVERS_DIR, 'elasticmq', 'elasticmq.cp');
  const gw = join(SERVERS_DIR, 'versitygw');
  if (!existsSync(cpFile)) throw missing('ElasticMQ');
  if (!existsSync(gw)) throw missing('versitygw');
  const dir = mkdtempSync(join(tmpdir(), 'ct-queue-store-'));
  const [sqsPort, s3Port] = [await freePort(), await freePort()];
  writeFileSync(
    join(dir, 'elasticmq.conf'),
    [
      'include classpath("application.conf")',
      `node-address { protocol = http, host = "127.0.0.1", port = ${sqsPort}, context-path = "" }`,
      `rest-sqs { enabled = true, bind-port = ${sqsPort}, bind-hostname = "127.0.0.1", sqs-limits = strict }`,
      'rest-stats { enabled = false }',
      '',
    ].join('\n'),
  );
  let emqLog = '';
  const emq = spawn('java', ['-Xmx512m', `-Dconfig.file=${join(dir, 'elasticmq.conf')}`, '-cp', readFileSync(cpFile, 'utf8').trim(), 'org.elasticmq.server.Main'], { stdio: ['ignore', 'pipe', 'pipe'] });
  for (const s of [emq.stdout!, emq.stderr!]) s.on('data', (c: Buffer) => (emqLog = (emqLog + c.toString()).slice(-6000)));
  let gwLog = '';
  const data = join(dir, 'store');
  mkdirSync(data);
  const store = spawn(gw, ['--port', `127.0.0.1:${s3Port}`, 'posix', data], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, ROOT_ACCESS_KEY: STORE_KEYS.AWS_ACCESS_KEY_ID, ROOT_SECRET_KEY: STORE_KEYS.AWS_SECRET_ACCESS_KEY },
  });
  for (const s of [store.stdout!, store.stderr!]) s.on('data', (c: Buffer) => (gwLog = (gwLog + c.toString()).slice(-6000)));
  const sqsUrl = `http://127.0.0.1:${sqsPort}`;
  const s3Url = `http://127.0.0.1:${s3Port}`;
  const stop = async () => {
    await Promise.all([stopChild(emq), stopChild(store)]);
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    // Any HTTP answer means listening (unsigned requests are refused, which is fine here).
    await waitFor('versitygw', store, () => gwLog, async () => (await fetch(s3Url, { signal: AbortSignal.timeout(2_000) })).status > 0);
    await waitFor('ElasticMQ', emq, () => emqLog, async () => (await fetch(`${sqsUrl}/?Action=ListQueues`, { signal: AbortSignal.timeout(2_000) })).status > 0);
  } catch (e) {
    await stop();
    throw e;
  }
  return {
    sqsUrl,
    s3Url,
    env: { ...STORE_KEYS, AWS_ENDPOINT_URL_SQS: sqsUrl, AWS_ENDPOINT_URL_S3: s3Url },
    stop,
  };
}

/**
 * Environment for a ct controller and its workers on these servers, as a fleet without AWS runs:
 * the two endpoints and the store's keys, no other AWS endpoint or profile; `timings` the fleet's.
 */
export function queueStoreFleetEnv(servers: QueueStore, dirs: { settings: string; state: string }, timings: Record<string, string>, extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, NO_COLOR: '1', ...servers.env, CT_SETTINGS_DIR: dirs.settings, CT_STATE_DIR: dirs.state, ...timings, ...extra };
  for (const k of Object.keys(env)) if (/^AWS_(ENDPOINT_URL$|ENDPOINT_URL_(STS|SSM|EC2|IAM)$|PROFILE$)/.test(k)) delete env[k];
  return env;
}
