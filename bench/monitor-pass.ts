/**
 * A monitor pass over synthetic logs against the scripted model server on 127.0.0.1 with a fixed
 * reply latency: actions rated per second at that latency and `--max-connections`, next to the
 * ceiling the latency allows (connections / latency), and the time of a second pass over the
 * same logs, answered wholly from the disk cache (no model call). Both passes run the basic
 * monitor through the real path: log reader, monitorSample, the OpenAI SDK over HTTP, the cache,
 * the log writer.
 *
 *   node dist/bench/monitor-pass.js                 4 logs x 50 samples x 10 actions, 200 ms, 16 connections
 *   node dist/bench/monitor-pass.js --quick         1 log x 20 samples x 10 actions
 *   options: --samples N --actions N --latency-ms N --connections N
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { loadConfig } from '../src/config/config.js';
import { createCachedMonitorModels } from '../src/control/monitor-calls.js';
import { MonitorCache } from '../src/control/monitor-cache.js';
import { monitorLog } from '../src/control/monitor-log.js';
import { createMonitor } from '../src/control/monitor-registry.js';
import { ModelRegistry } from '../src/models/model-registry.js';
import { monitorReply, promptOf, shapedSample, writeLog } from '../test/control/helpers/monitor-fixtures.js';
import { FakeModelServer } from '../test/policies/helpers/fake-model-server.js';

const { values } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    samples: { type: 'string' },
    actions: { type: 'string', default: '10' },
    'latency-ms': { type: 'string', default: '200' },
    connections: { type: 'string', default: '16' },
  },
});
const SAMPLES = Number(values.samples ?? (values.quick ? 20 : 200));
const LOGS = values.quick ? 1 : 4;
const ACTIONS = Number(values.actions);
const LATENCY_MS = Number(values['latency-ms']);
const CONNECTIONS = Number(values.connections);

async function pass(o: { logs: string[]; out: string; cacheDir: string; baseUrl: string }): Promise<{ seconds: number; calls: number; hits: number; rated: number }> {
  const config = loadConfig({ cwd: tmpdir(), env: { OPENAI_API_KEY: 'sk-bench-fake' }, overrides: { 'models.aliases.trusted': 'openai/fake' } });
  const calls = createCachedMonitorModels({ cache: new MonitorCache(o.cacheDir), maxConnections: CONNECTIONS });
  const monitor = await createMonitor('basic', { base_url: o.baseUrl }, { models: new ModelRegistry(config.models), calls, cwd: tmpdir() });
  const started = performance.now();
  let rated = 0;
  // As the CLI does: a few logs at once, each with up to --max-connections samples going.
  await Promise.all(
    o.logs.map(async (input) => {
      const r = await monitorLog({ input, outputDir: o.out, monitor, args: {}, version: 'bench', samplesAtOnce: CONNECTIONS });
      rated += r.counts.rated;
    }),
  );
  return { seconds: (performance.now() - started) / 1000, calls: calls.stats.calls, hits: calls.stats.cacheHits, rated };
}

async function main(): Promise<void> {
  const work = mkdtempSync(join(tmpdir(), 'ct-bench-monitor-'));
  const server = await new FakeModelServer(({ body }) => monitorReply(promptOf(body))).start();
  server.replyDelayMs = LATENCY_MS;
  try {
    const perLog = Math.ceil(SAMPLES / LOGS);
    const logs: string[] = [];
    for (let l = 0; l < LOGS; l++) {
      const samples = Array.from({ length: Math.min(perLog, SAMPLES - l * perLog) }, (_, i) =>
        shapedSample({ id: `s${l}-${i}`, actions: Array.from({ length: ACTIONS }, (_, a) => (a === 7 && i % 5 === 0 ? 'cat /etc/secret_key' : `ls /srv/${l}/${i}/${a}`)) }),
      );
      logs.push(await writeLog(join(work, 'in'), `log-${l}.eval`, samples));
    }
    const cacheDir = join(work, 'cache');
    const first = await pass({ logs, out: join(work, 'out'), cacheDir, baseUrl: server.openaiBaseUrl });
    const requests = server.requests.length;
    const second = await pass({ logs, out: join(work, 'out'), cacheDir, baseUrl: server.openaiBaseUrl });
    const ceiling = CONNECTIONS / (LATENCY_MS / 1000);
    const lines = [
      `monitor pass: ${LOGS} log(s), ${SAMPLES} samples x ${ACTIONS} actions = ${first.rated} actions; basic monitor, OpenAI protocol, reply latency ${LATENCY_MS} ms, --max-connections ${CONNECTIONS}`,
      `machine: ${cpus().length} CPUs, Node ${process.version}`,
      '',
      '| pass | seconds | actions/s | model calls | cache hits |',
      '|---|---|---|---|---|',
      `| first (model) | ${first.seconds.toFixed(2)} | ${(first.rated / first.seconds).toFixed(1)} | ${first.calls} | ${first.hits} |`,
      `| second (cached) | ${second.seconds.toFixed(2)} | ${(second.rated / second.seconds).toFixed(1)} | ${second.calls} | ${second.hits} |`,
      '',
      `ceiling at this latency and concurrency: ${ceiling.toFixed(1)} actions/s; first pass at ${((first.rated / first.seconds / ceiling) * 100).toFixed(0)}% of it`,
      `requests the server saw: ${requests} in the first pass, ${server.requests.length - requests} in the second`,
    ];
    process.stdout.write(`${lines.join('\n')}\n`);
  } finally {
    await server.stop();
    rmSync(work, { recursive: true, force: true });
  }
}

await main();
