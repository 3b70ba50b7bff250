/**
 * The fleet's queue and store contract on ElasticMQ (SQS) and versitygw (S3), the servers a fleet
 * without AWS runs on: the same conformance suite as the in-memory twins and moto.
 */
import { after, before } from 'node:test';
import { CreateBucketCommand, S3Client } from '@aws-sdk/client-s3';
import { SQSClient } from '@aws-sdk/client-sqs';
import { STORE_KEYS, startQueueStore, type QueueStore } from '../helpers/queue-store.js';
import { fleetConformance, sdkBackend, type FleetBackend } from './conformance.js';

process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED = 'true';

const PREFIX = 'ct-test-';
const BUCKET = 'ct-conformance';
let servers: QueueStore;
let backend: FleetBackend;

before(async () => {
  servers = await startQueueStore();
  const credentials = { accessKeyId: STORE_KEYS.AWS_ACCESS_KEY_ID, secretAccessKey: STORE_KEYS.AWS_SECRET_ACCESS_KEY };
  const sqs = new SQSClient({ region: 'us-east-1', endpoint: servers.sqsUrl, credentials, maxAttempts: 1 });
  const s3 = new S3Client({ region: 'us-east-1', endpoint: servers.s3Url, credentials, maxAttempts: 1, forcePathStyle: true });
  await s3.send(new CreateBucketCommand({ Bucket: BUCKET }));
  backend = sdkBackend(sqs, s3, BUCKET, PREFIX);
});

after(async () => {
  await servers?.stop();
});

fleetConformance('SQS and S3 on ElasticMQ and versitygw', () => backend);
