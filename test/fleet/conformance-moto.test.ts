import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { CreateBucketCommand, HeadObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { SQSClient } from '@aws-sdk/client-sqs';
import { S3ResultStore } from '../../src/fleet/s3-result-store.js';
import { startMoto, type Moto } from '../helpers/moto.js';
import { fleetConformance, sdkBackend, type FleetBackend } from './conformance.js';

process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED = 'true';

const PREFIX = 'ct-test-';
const BUCKET = 'ct-conformance';
let moto: Moto;
let backend: FleetBackend;
let s3: S3Client;

before(async () => {
  moto = await startMoto();
  const common = { region: 'us-east-1', endpoint: moto.url, credentials: { accessKeyId: 'testing', secretAccessKey: 'testing' }, maxAttempts: 1 };
  const sqs = new SQSClient(common);
  s3 = new S3Client({ ...common, forcePathStyle: true });
  await s3.send(new CreateBucketCommand({ Bucket: BUCKET }));
  backend = sdkBackend(sqs, s3, BUCKET, PREFIX);
});

after(async () => {
  await moto?.stop();
});

fleetConformance('SQS and S3 on moto', () => backend);

test('results, manifests and artifacts are stored encrypted at rest (SSE AES256)', async () => {
  const store = new S3ResultStore({ s3, bucket: BUCKET, fleetId: 'sse-check' });
  await store.putResult('job-1', Buffer.from('x'));
  await store.putArtifact('b'.repeat(40), Buffer.from('tar'));
  for (const key of ['sse-check/job-1.eval', `artifacts/${'b'.repeat(40)}.tar.gz`]) {
    const head = await s3.send(new HeadObjectCommand({ Bucket: BUCKET, Key: key }));
    assert.equal(head.ServerSideEncryption, 'AES256', key);
  }
});
