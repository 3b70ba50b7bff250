/**
 * What the fleet tests share: a moto_server, the environment a `ct` controller and its workers
 * see (moto endpoint, fake keys, scaled-down timeouts), and what moto holds (queues, buckets,
 * objects), so a test can check that bad input created nothing.
 */
import { ListBucketsCommand, ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import { ListQueuesCommand, SQSClient } from '@aws-sdk/client-sqs';
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EXAMPLE_SETTINGS, ctEnv } from './cli.js';
import type { Moto } from './moto.js';

export const FAKE_AWS = { AWS_ACCESS_KEY_ID: 'AKIAFAKEFAKEFAKE', AWS_SECRET_ACCESS_KEY: 'fake-secret', AWS_REGION: 'us-east-1' };

/** A work dir with a private copy of the example settings and state. */
export function fleetWorkDir(name: string): { work: string; settings: string; state: string } {
  const work = mkdtempSync(join(tmpdir(), `ct-fleet-${name}-`));
  const settings = join(work, 'settings');
  cpSync(EXAMPLE_SETTINGS, settings, { recursive: true });
  return { work, settings, state: join(work, 'state') };
}

/** The fleet's timings scaled down for tests: polls every second, short visibility, no retry delay. */
export const FLEET_TEST_TIMINGS = {
  CT_FLEET_POLL_SECONDS: '1',
  CT_FLEET_CHECK_SECONDS: '1',
  CT_FLEET_VISIBILITY_TIMEOUT: '6',
  CT_FLEET_RETRY_DELAY: '0',
  CT_FLEET_IDLE_POLLS: '3',
};

/** Environment for a ct controller and its local workers: moto, fake keys, timeouts scaled down. */
export function fleetEnv(moto: Moto, dirs: { settings: string; state: string }, extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env = ctEnv({
    ...FAKE_AWS,
    AWS_ENDPOINT_URL: moto.url,
    CT_SETTINGS_DIR: dirs.settings,
    CT_STATE_DIR: dirs.state,
    ...FLEET_TEST_TIMINGS,
    ...extra,
  });
  delete env.AWS_PROFILE;
  return env;
}

export interface MotoContents {
  queues: string[];
  buckets: string[];
  objects: string[];
}

/** Every queue, bucket and object moto holds. */
export async function motoContents(moto: Moto): Promise<MotoContents> {
  const common = { region: 'us-east-1', endpoint: moto.url, credentials: { accessKeyId: FAKE_AWS.AWS_ACCESS_KEY_ID, secretAccessKey: FAKE_AWS.AWS_SECRET_ACCESS_KEY } };
  const sqs = new SQSClient(common);
  const s3 = new S3Client({ ...common, forcePathStyle: true });
  try {
    const queues = ((await sqs.send(new ListQueuesCommand({}))).QueueUrls ?? []).map((u) => u.split('/').pop()!);
    const buckets = ((await s3.send(new ListBucketsCommand({}))).Buckets ?? []).map((b) => b.Name!);
    const objects: string[] = [];
    for (const b of buckets) {
      const r = await s3.send(new ListObjectsV2Command({ Bucket: b }));
      objects.push(...(r.Contents ?? []).map((o) => `${b}/${o.Key}`));
    }
    return { queues, buckets, objects };
  } finally {
    sqs.destroy();
    s3.destroy();
  }
}

/**
 * Compose projects of ct sandboxes whose names contain `part` (left running = a leak). A project
 * name keeps the task id's underscores (`ct-<run>-<n>-create_greeting-e1`); `part` may spell them
 * as dashes.
 */
export function ctProjects(part: string): string[] {
  const out = execFileSync('docker', ['ps', '-a', '--filter', 'label=com.docker.compose.project', '--format', '{{.Label "com.docker.compose.project"}}'], { encoding: 'utf8' });
  const fold = (s: string) => s.replace(/_/g, '-');
  return [...new Set(out.split('\n').filter((p) => p.startsWith('ct-') && fold(p).includes(fold(part))))];
}

/** The events a controller appended for a fleet. */
export function readEvents(text: string): Array<Record<string, unknown> & { event: string }> {
  return text
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Record<string, unknown> & { event: string });
}

/** Waits until `fn` returns something truthy, polling every 200 ms; throws naming `what` after `timeoutMs`. */
export async function until<T>(what: string, fn: () => T | undefined | false, timeoutMs = 90_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = fn();
    if (v !== undefined && v !== false) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** A file's text, or '' when it does not exist (yet). */
export function readIf(path: string): string {
  return existsSync(path) ? readFileSync(path, 'utf8') : '';
}

/** Whether a process with this pid lives. */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/**
 * Makes the work dir's demo setting a registered git repository (external and EC2 workers pull
 * settings from git), committing what the folder holds; `configExtra` is appended to ct.config.yml.
 */
export function registerDemoSetting(dirs: { work: string; settings: string }, configExtra = ''): string {
  const demo = join(dirs.settings, 'demo');
  const git = (...args: string[]) => execFileSync('git', ['-c', 'user.email=t@example.com', '-c', 'user.name=t', ...args], { cwd: demo, stdio: 'ignore' });
  git('init', '-q');
  git('add', '-A');
  git('commit', '-qm', 'demo');
  writeFileSync(join(dirs.work, 'ct.config.yml'), `settings:\n  demo:\n    repo: ${demo}\n${configExtra}`);
  return demo;
}
