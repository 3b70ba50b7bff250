/**
 * The fleet's queue and store contract on ElasticMQ (SQS) and versitygw (S3), the servers a fleet
 * without AWS runs on: the same conformance suite as the in-memory twins and moto.
 */
import { after, before } from 'node:test';
import { CreateBucketCommand, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { GetQueueAttributesCommand, GetQueueUrlCommand, SendMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import { S3ResultStore } from '../../src/fleet/s3-result-store.js';
import { SqsJobQueue } from '../../src/fleet/sqs-job-queue.js';
import { STORE_KEYS, startQueueStore, type QueueStore } from '../helpers/queue-store.js';
import { fleetConformance, type FleetBackend } from './conformance.js';

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
  const workUrl = async (fleetId: string) => (await sqs.send(new GetQueueUrlCommand({ QueueName: `${PREFIX}${fleetId}-work` }))).QueueUrl!;
  backend = {
    queue: (fleetId) => new SqsJobQueue({ sqs, fleetId, queuePrefix: PREFIX }),
    store: (fleetId) => new S3ResultStore({ s3, bucket: BUCKET, fleetId }),
    sendRaw: async (fleetId, body) => void (await sqs.send(new SendMessageCommand({ QueueUrl: await workUrl(fleetId), MessageBody: body }))),
    putRaw: async (key, body) => void (await s3.send(new PutObjectCommand({ Bucket: BUCKET, Key: key, Body: body }))),
    workAttributes: async (fleetId) => (await sqs.send(new GetQueueAttributesCommand({ QueueUrl: await workUrl(fleetId), AttributeNames: ['All'] }))).Attributes ?? {},
  };
});

after(async () => {
  await servers?.stop();
});

fleetConformance('SQS and S3 on ElasticMQ and versitygw', () => backend);
