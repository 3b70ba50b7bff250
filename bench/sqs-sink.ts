/**
 * A loopback server speaking SQS's JSON protocol (the AWS SDK's `AmazonSQS.*` targets) that keeps
 * nothing but counts: the queue calls a fleet controller makes to create its queues and enqueue
 * jobs, answered at once. For the enqueue bench only: it measures what ct's client side sends
 * per second when the service keeps up, next to what moto_server takes.
 */
import { createHash } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface SqsSink {
  url: string;
  /** Messages accepted by SendMessageBatch / SendMessage. */
  messages(): number;
  close(): Promise<void>;
}

const md5 = (s: string) => createHash('md5').update(s, 'utf8').digest('hex');

export async function startSqsSink(): Promise<SqsSink> {
  let count = 0;
  const queues = new Set<string>();
  let base = '';
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const action = String(req.headers['x-amz-target'] ?? '').replace(/^AmazonSQS\./, '');
      const body = chunks.length ? (JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>) : {};
      const reply = (status: number, obj: unknown, extra: Record<string, string> = {}) => {
        res.writeHead(status, { 'content-type': 'application/x-amz-json-1.0', ...extra });
        res.end(JSON.stringify(obj));
      };
      const queueUrl = (name: string) => `${base}/000000000000/${name}`;
      switch (action) {
        case 'CreateQueue':
          queues.add(String(body.QueueName));
          return reply(200, { QueueUrl: queueUrl(String(body.QueueName)) });
        case 'GetQueueUrl':
          if (!queues.has(String(body.QueueName))) {
            return reply(400, { __type: 'com.amazonaws.sqs#QueueDoesNotExist', message: 'The specified queue does not exist.' }, { 'x-amzn-query-error': 'AWS.SimpleQueueService.NonExistentQueue;Sender' });
          }
          return reply(200, { QueueUrl: queueUrl(String(body.QueueName)) });
        case 'GetQueueAttributes':
          // Only what creating a fleet's queues reads back: the dead-letter queue's ARN.
          return reply(200, { Attributes: { QueueArn: `arn:aws:sqs:us-east-1:000000000000:${String(body.QueueUrl).split('/').pop()}` } });
        case 'SetQueueAttributes':
          return reply(200, {});
        case 'SendMessageBatch': {
          const entries = (body.Entries ?? []) as { Id: string; MessageBody: string }[];
          count += entries.length;
          return reply(200, { Successful: entries.map((e) => ({ Id: e.Id, MessageId: `${count}-${e.Id}`, MD5OfMessageBody: md5(e.MessageBody) })), Failed: [] });
        }
        case 'SendMessage':
          count++;
          return reply(200, { MessageId: String(count), MD5OfMessageBody: md5(String(body.MessageBody)) });
        default:
          return reply(400, { __type: 'com.amazonaws.sqs#UnsupportedOperation', message: `${action} is not part of this sink` });
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url: base,
    messages: () => count,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}
