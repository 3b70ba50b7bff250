/**
 * The fleet's merge (mergeFleetResults) of every result of a manifest from an S3-compatible store,
 * in its own process so its peak RSS is the merge's alone, through the S3 client the controller
 * uses (`createFleetClients`). The store comes from the environment (AWS_ENDPOINT_URL_S3 and
 * keys). Prints {seconds, cpuSeconds, maxRssMb, samples, missing} as JSON.
 * Usage: node dist/bench/fleet-merge-child.js MANIFEST_JSON BUCKET OUT_DIR
 */
import { readFileSync } from 'node:fs';
import { ctVersion } from '../src/cli/version.js';
import { createFleetClients } from '../src/cloud/aws-clients.js';
import { mergeFleetResults } from '../src/fleet/merge-results.js';
import { fleetLogHeader } from '../src/fleet/one-sample-log.js';
import type { Manifest } from '../src/fleet/protocol.js';
import { S3ResultStore } from '../src/fleet/s3-result-store.js';

const [manifestFile, bucket, outDir] = process.argv.slice(2);
if (!manifestFile || !bucket || !outDir) {
  console.error('usage: node dist/bench/fleet-merge-child.js MANIFEST_JSON BUCKET OUT_DIR');
  process.exit(2);
}
const manifest = JSON.parse(readFileSync(manifestFile, 'utf8')) as Manifest;
const { s3, sqs, ssm, sts } = createFleetClients(process.env.AWS_REGION ?? 'us-east-1');
const store = new S3ResultStore({ s3, bucket, fleetId: manifest.fleet_id });
const started = performance.now();
const r = await mergeFleetResults({ store, manifest, header: fleetLogHeader(manifest, ctVersion()), logDir: outDir });
const seconds = (performance.now() - started) / 1000;
const cpu = process.cpuUsage();
process.stdout.write(
  `${JSON.stringify({ seconds, cpuSeconds: (cpu.user + cpu.system) / 1e6, maxRssMb: process.resourceUsage().maxRSS / 1024, samples: r.rows.length, missing: r.rows.filter((x) => x.error).length })}\n`,
);
for (const client of [s3, sqs, ssm, sts]) client.destroy();
