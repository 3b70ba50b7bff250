import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { GetObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { GetQueueUrlCommand, SQSClient } from '@aws-sdk/client-sqs';
import { CloudError, ConfigError, cloudError, isRetryable } from '../../src/errors.js';
import { freePort } from '../helpers/sshd.js';

process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED = 'true';

/** What the loopback server answers next: an AWS error response as the service would send it. */
let reply: { status: number; headers: Record<string, string>; body: string };
let server: Server;
let url: string;

before(async () => {
  server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(reply.status, reply.headers);
      res.end(reply.body);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

after(() => new Promise<void>((r) => server.close(() => r())));

const common = () => ({ region: 'us-east-1', endpoint: url, credentials: { accessKeyId: 'testing', secretAccessKey: 'testing' }, maxAttempts: 1 });

/** An S3 error response (REST-XML). */
function s3Error(status: number, code: string) {
  reply = { status, headers: { 'content-type': 'application/xml' }, body: `<?xml version="1.0"?><Error><Code>${code}</Code><Message>${code} happened</Message></Error>` };
}

/** An SQS error response (AWS JSON 1.0, with the query-compatible code header SQS sends). */
function sqsError(status: number, type: string, queryCode = type) {
  reply = {
    status,
    headers: { 'content-type': 'application/x-amz-json-1.0', 'x-amzn-query-error': `${queryCode};${status >= 500 ? 'Receiver' : 'Sender'}` },
    body: JSON.stringify({ __type: `com.amazonaws.sqs#${type}`, message: `${type} happened` }),
  };
}

async function s3Failure(): Promise<unknown> {
  try {
    await new S3Client({ ...common(), forcePathStyle: true }).send(new GetObjectCommand({ Bucket: 'b', Key: 'k' }));
  } catch (e) {
    return e;
  }
  throw new Error('the call succeeded');
}

async function sqsFailure(): Promise<unknown> {
  try {
    await new SQSClient(common()).send(new GetQueueUrlCommand({ QueueName: 'q' }));
  } catch (e) {
    return e;
  }
  throw new Error('the call succeeded');
}

describe('cloudError decides what is retried from the SDK error a real response produces', () => {
  const cases: { what: string; set: () => void; call: () => Promise<unknown>; retryable: boolean; code: string; status: number }[] = [
    { what: 'S3 SlowDown (503)', set: () => s3Error(503, 'SlowDown'), call: s3Failure, retryable: true, code: 'SlowDown', status: 503 },
    { what: 'S3 InternalError (500)', set: () => s3Error(500, 'InternalError'), call: s3Failure, retryable: true, code: 'InternalError', status: 500 },
    { what: 'S3 RequestTimeout (400)', set: () => s3Error(400, 'RequestTimeout'), call: s3Failure, retryable: true, code: 'RequestTimeout', status: 400 },
    { what: 'S3 AccessDenied (403)', set: () => s3Error(403, 'AccessDenied'), call: s3Failure, retryable: false, code: 'AccessDenied', status: 403 },
    { what: 'S3 NoSuchBucket (404)', set: () => s3Error(404, 'NoSuchBucket'), call: s3Failure, retryable: false, code: 'NoSuchBucket', status: 404 },
    { what: 'S3 unknown client error (418)', set: () => s3Error(418, 'Teapot'), call: s3Failure, retryable: false, code: 'Teapot', status: 418 },
    { what: 'SQS ThrottlingException (400)', set: () => sqsError(400, 'ThrottlingException', 'ThrottlingException'), call: sqsFailure, retryable: true, code: 'ThrottlingException', status: 400 },
    { what: 'SQS ServiceUnavailable (503)', set: () => sqsError(503, 'ServiceUnavailable'), call: sqsFailure, retryable: true, code: 'ServiceUnavailable', status: 503 },
    {
      what: 'SQS QueueDoesNotExist (400)',
      set: () => sqsError(400, 'QueueDoesNotExist', 'AWS.SimpleQueueService.NonExistentQueue'),
      call: sqsFailure,
      retryable: false,
      code: 'QueueDoesNotExist',
      status: 400,
    },
    {
      what: 'SQS QueueDeletedRecently (400)',
      set: () => sqsError(400, 'QueueDeletedRecently', 'AWS.SimpleQueueService.QueueDeletedRecently'),
      call: sqsFailure,
      retryable: true,
      code: 'QueueDeletedRecently',
      status: 400,
    },
    { what: 'SQS AccessDenied (403)', set: () => sqsError(403, 'AccessDenied', 'AccessDenied'), call: sqsFailure, retryable: false, code: 'AccessDenied', status: 403 },
  ];
  for (const c of cases) {
    test(`${c.what}: ${c.retryable ? 'retried' : 'not retried'}`, async () => {
      c.set();
      const err = cloudError(await c.call(), 'doing the thing');
      assert.ok(err instanceof CloudError, String(err));
      assert.equal(err.retryable, c.retryable);
      assert.equal(isRetryable(err), c.retryable);
      assert.equal(err.code, c.code);
      assert.equal(err.status, c.status);
      assert.match(err.message, new RegExp(`^doing the thing: .*${c.code}`));
    });
  }

  test('no answer at all (connection refused) is retried', async () => {
    const port = await freePort();
    let e: unknown;
    try {
      await new SQSClient({ ...common(), endpoint: `http://127.0.0.1:${port}` }).send(new GetQueueUrlCommand({ QueueName: 'q' }));
    } catch (x) {
      e = x;
    }
    const err = cloudError(e, 'looking up a queue');
    assert.ok(err instanceof CloudError);
    assert.equal(err.retryable, true);
    assert.equal(err.status, undefined);
  });

  test('a call ct cancelled itself is not retried', async () => {
    sqsError(503, 'ServiceUnavailable');
    let e: unknown;
    try {
      await new SQSClient(common()).send(new GetQueueUrlCommand({ QueueName: 'q' }), { abortSignal: AbortSignal.abort() });
    } catch (x) {
      e = x;
    }
    assert.equal((cloudError(e, 'looking up a queue') as CloudError).retryable, false);
  });

  test('an error ct already classified passes through unchanged', () => {
    const config = new ConfigError('bad flag');
    assert.equal(cloudError(config, 'x'), config);
    assert.equal(isRetryable(cloudError(config, 'x')), false);
  });
});
