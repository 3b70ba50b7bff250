/**
 * A loopback HTTP proxy between ct and moto_server that injects the faults real AWS gives and moto
 * never does. Point ct at it with AWS_ENDPOINT_URL=proxy.url; every request is forwarded to moto
 * unless a fault is drawn for it. Hand-written on node:http: no library injects AWS-shaped errors
 * per action.
 *
 * The action is read from the request: the `X-Amz-Target` header (JSON protocols: SQS, SSM),
 * `Action=` in the query or form body (query protocols: EC2, STS), or method + path (S3 REST,
 * path-style: PutObject, GetObject, HeadObject, ListObjectsV2, ...). The service comes from the
 * SigV4 credential scope in `Authorization`.
 *
 * Faults, each answered in the wire format of its protocol:
 *   - drop: the socket is destroyed before the request reaches moto (nothing happened);
 *   - drop-after: the request reaches moto, then the socket is destroyed (it happened, the caller
 *     does not know: a retried send duplicates a message);
 *   - delay: 0.2–1.5 s (or `delayMs`) before forwarding;
 *   - throttle: `ThrottlingException` (JSON protocols), `RequestLimitExceeded` (EC2),
 *     `Throttling` (other query services), `SlowDown` 503 (S3);
 *   - 5xx: `InternalError` 500 or `ServiceUnavailable` 503;
 *   - aws-only: `ReceiptHandleIsInvalid` (SQS DeleteMessage, ChangeMessageVisibility),
 *     `MessageNotInflight` (ChangeMessageVisibility), `QueueDeletedRecently` (CreateQueue),
 *     `InsufficientInstanceCapacity` (EC2 RunInstances).
 * Kept off where AWS itself never sends them: an aws-only error on any other action; `SlowDown`
 * outside S3; `RequestLimitExceeded` outside EC2; anything on moto's own `/moto-api/` (test
 * plumbing, not AWS).
 *
 * Whether the n-th call of an action is faulted, and how, depends only on (seed, action, n), so a
 * failing run replays the same faults per action even when calls of different actions interleave
 * differently.
 */
import { Agent, createServer, request, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export type FaultKind = 'drop' | 'drop-after' | 'delay' | 'throttle' | '5xx' | 'aws-only';
export const FAULT_KINDS: FaultKind[] = ['drop', 'drop-after', 'delay', 'throttle', '5xx', 'aws-only'];

export interface FaultProxyOptions {
  /** Where moto listens, e.g. http://127.0.0.1:5000. */
  target: string;
  /** The fraction of calls faulted (0..1). */
  rate: number;
  /** Seeds the draws; the same seed faults the same n-th calls of each action. */
  seed: number;
  /** The kinds drawn from (default: all). */
  kinds?: FaultKind[];
  /** Only these `service:Action` are faulted, e.g. `s3:GetObject` (default: every action). */
  actions?: string[];
  /** The range of an injected delay, ms (default 200–1500). */
  delayMs?: [number, number];
}

export interface FaultProxy {
  url: string;
  /** Calls seen, by `service:Action`. */
  calls: Map<string, number>;
  /** Faults injected, by kind, then by `service:Action`. */
  faults: Map<FaultKind, Map<string, number>>;
  totalCalls(): number;
  totalFaults(): number;
  /** One line per kind: `throttle 12 (sqs:ReceiveMessage 7, s3:PutObject 5)`. */
  report(): string;
  stop(): Promise<void>;
}

type Protocol = 'json' | 'query' | 'ec2' | 's3';

interface Call {
  service: string;
  action: string;
  protocol: Protocol;
}

/** A 32-bit hash of a string (FNV-1a) mixed into a PRNG state. */
function hash(text: string, seed: number): number {
  let h = 0x811c9dc5 ^ seed;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
  return h >>> 0;
}

/** mulberry32: a small seeded PRNG, enough to spread draws evenly. */
function prng(state: number): () => number {
  let a = state;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function serviceOf(req: IncomingMessage): string {
  const m = /Credential=[^/]+\/[^/]+\/[^/]+\/([^/]+)\//.exec(String(req.headers.authorization ?? ''));
  return m?.[1] ?? 'unknown';
}

/** The S3 REST operation of a path-style request. */
function s3Action(method: string, url: URL): string {
  const [bucket, ...rest] = url.pathname.split('/').filter(Boolean);
  const q = url.searchParams;
  if (!bucket) return 'ListBuckets';
  if (rest.length === 0) {
    if (method === 'GET') return q.get('list-type') === '2' ? 'ListObjectsV2' : q.has('location') ? 'GetBucketLocation' : 'ListObjects';
    if (method === 'HEAD') return 'HeadBucket';
    if (method === 'PUT') return q.size === 0 ? 'CreateBucket' : `PutBucket${[...q.keys()][0]}`;
    if (method === 'DELETE') return 'DeleteBucket';
    if (method === 'POST' && q.has('delete')) return 'DeleteObjects';
    return `${method}Bucket`;
  }
  if (method === 'GET') return 'GetObject';
  if (method === 'HEAD') return 'HeadObject';
  if (method === 'PUT') return q.has('partNumber') ? 'UploadPart' : 'PutObject';
  if (method === 'DELETE') return 'DeleteObject';
  return `${method}Object`;
}

function classify(req: IncomingMessage, body: Buffer): Call {
  const service = serviceOf(req);
  const url = new URL(req.url ?? '/', 'http://x');
  const target = req.headers['x-amz-target'];
  if (typeof target === 'string') return { service, action: target.split('.').pop()!, protocol: 'json' };
  if (service === 's3') return { service, action: s3Action(req.method ?? 'GET', url), protocol: 's3' };
  let action = url.searchParams.get('Action');
  if (!action && String(req.headers['content-type'] ?? '').includes('x-www-form-urlencoded')) action = new URLSearchParams(body.toString('utf8')).get('Action');
  return { service, action: action ?? `${req.method} ${url.pathname}`, protocol: service === 'ec2' ? 'ec2' : 'query' };
}

interface ErrorSpec {
  code: string;
  status: number;
  message: string;
  /** SQS's query-protocol spelling, sent in `x-amzn-query-error` beside a JSON error. */
  queryCode?: string;
  fault: 'Sender' | 'Receiver';
}

/** The AWS-only errors each action may get, as AWS words them. */
function awsOnlyErrors(call: Call): ErrorSpec[] {
  const { service, action } = call;
  const out: ErrorSpec[] = [];
  if (service === 'sqs' && (action === 'DeleteMessage' || action === 'ChangeMessageVisibility')) {
    out.push({ code: 'ReceiptHandleIsInvalid', status: 400, fault: 'Sender', message: 'The input receipt handle is invalid.' });
  }
  if (service === 'sqs' && action === 'ChangeMessageVisibility') {
    out.push({ code: 'MessageNotInflight', queryCode: 'AWS.SimpleQueueService.MessageNotInflight', status: 400, fault: 'Sender', message: 'The message referred to is not in flight.' });
  }
  if (service === 'sqs' && action === 'CreateQueue') {
    out.push({
      code: 'QueueDeletedRecently',
      queryCode: 'AWS.SimpleQueueService.QueueDeletedRecently',
      status: 400,
      fault: 'Sender',
      message: 'You must wait 60 seconds after deleting a queue before you can create another with the same name.',
    });
  }
  if (service === 'ec2' && action === 'RunInstances') {
    out.push({ code: 'InsufficientInstanceCapacity', status: 500, fault: 'Receiver', message: 'We currently do not have sufficient capacity in the Availability Zone you requested.' });
  }
  return out;
}

function throttleError(call: Call): ErrorSpec {
  if (call.protocol === 's3') return { code: 'SlowDown', status: 503, fault: 'Receiver', message: 'Please reduce your request rate.' };
  if (call.protocol === 'ec2') return { code: 'RequestLimitExceeded', status: 503, fault: 'Sender', message: 'Request limit exceeded.' };
  if (call.protocol === 'json') return { code: 'ThrottlingException', status: 400, fault: 'Sender', message: 'Rate exceeded' };
  return { code: 'Throttling', status: 400, fault: 'Sender', message: 'Rate exceeded' };
}

function serverError(rand: () => number): ErrorSpec {
  return rand() < 0.5
    ? { code: 'InternalError', status: 500, fault: 'Receiver', message: 'We encountered an internal error. Please try again.' }
    : { code: 'ServiceUnavailable', status: 503, fault: 'Receiver', message: 'Service is unable to handle request.' };
}

/** Writes `err` in the wire format of the call's protocol. */
function sendError(res: ServerResponse, call: Call, err: ErrorSpec): void {
  const id = `fault-${Math.random().toString(16).slice(2, 10)}`;
  let body: string;
  const headers: Record<string, string> = { 'x-amzn-requestid': id };
  if (call.protocol === 'json') {
    const prefix = call.service === 'sqs' ? 'com.amazonaws.sqs#' : '';
    body = JSON.stringify({ __type: `${prefix}${err.code}`, message: err.message });
    headers['content-type'] = 'application/x-amz-json-1.0';
    if (call.service === 'sqs') headers['x-amzn-query-error'] = `${err.queryCode ?? err.code};${err.fault}`;
  } else if (call.protocol === 's3') {
    body = `<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>${err.code}</Code><Message>${err.message}</Message><RequestId>${id}</RequestId></Error>`;
    headers['content-type'] = 'application/xml';
    headers['x-amz-request-id'] = id;
  } else if (call.protocol === 'ec2') {
    body = `<?xml version="1.0" encoding="UTF-8"?>\n<Response><Errors><Error><Code>${err.code}</Code><Message>${err.message}</Message></Error></Errors><RequestID>${id}</RequestID></Response>`;
    headers['content-type'] = 'text/xml';
  } else {
    body = `<ErrorResponse><Error><Type>${err.fault}</Type><Code>${err.queryCode ?? err.code}</Code><Message>${err.message}</Message></Error><RequestId>${id}</RequestId></ErrorResponse>`;
    headers['content-type'] = 'text/xml';
  }
  // HEAD answers carry no body; the SDK then names the error from the status alone, as with AWS.
  res.writeHead(err.status, headers);
  res.end(res.req.method === 'HEAD' ? undefined : body);
}

/** Starts the proxy on a free loopback port. */
export async function startAwsFaultProxy(options: FaultProxyOptions): Promise<FaultProxy> {
  const target = new URL(options.target);
  const kinds = options.kinds ?? FAULT_KINDS;
  const [delayMin, delayMax] = options.delayMs ?? [200, 1500];
  const agent = new Agent({ keepAlive: true, maxSockets: 32 });
  const calls = new Map<string, number>();
  const faults = new Map<FaultKind, Map<string, number>>(FAULT_KINDS.map((k) => [k, new Map()]));
  const count = (m: Map<string, number>, key: string) => m.set(key, (m.get(key) ?? 0) + 1);

  /** The fault for the n-th call of an action, if any, and a PRNG for its details. */
  function draw(call: Call, n: number): { kind: FaultKind | null; rand: () => number } {
    const rand = prng(hash(`${call.service}:${call.action}#${n}`, options.seed));
    if (rand() >= options.rate || (options.actions && !options.actions.includes(`${call.service}:${call.action}`))) return { kind: null, rand };
    const allowed = kinds.filter((k) => k !== 'aws-only' || awsOnlyErrors(call).length > 0);
    if (allowed.length === 0) return { kind: null, rand };
    return { kind: allowed[Math.floor(rand() * allowed.length)]!, rand };
  }

  function forward(req: IncomingMessage, body: Buffer, onResponse: (up: IncomingMessage) => void, onError: () => void): void {
    const up = request(
      { host: target.hostname, port: target.port, method: req.method, path: req.url, headers: req.headers, agent },
      onResponse,
    );
    up.on('error', onError);
    up.end(body);
  }

  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const fail = () => res.destroy();
      const pass = () =>
        forward(
          req,
          body,
          (up) => {
            res.writeHead(up.statusCode ?? 502, up.headers);
            up.pipe(res);
          },
          fail,
        );
      if ((req.url ?? '').startsWith('/moto-api')) return pass();
      const call = classify(req, body);
      const key = `${call.service}:${call.action}`;
      const n = count(calls, key).get(key)!;
      const { kind, rand } = draw(call, n);
      if (kind === null) return pass();
      count(faults.get(kind)!, key);
      switch (kind) {
        case 'drop':
          return req.socket.destroy();
        case 'drop-after':
          return forward(req, body, (up) => up.resume().on('end', () => req.socket.destroy()), fail);
        case 'delay':
          return void setTimeout(pass, delayMin + Math.floor(rand() * (delayMax - delayMin)));
        case 'throttle':
          return sendError(res, call, throttleError(call));
        case '5xx':
          return sendError(res, call, serverError(rand));
        case 'aws-only': {
          const errs = awsOnlyErrors(call);
          return sendError(res, call, errs[Math.floor(rand() * errs.length)]!);
        }
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const sum = (m: Map<string, number>) => [...m.values()].reduce((a, b) => a + b, 0);
  return {
    url: `http://127.0.0.1:${port}`,
    calls,
    faults,
    totalCalls: () => sum(calls),
    totalFaults: () => [...faults.values()].reduce((a, m) => a + sum(m), 0),
    report: () =>
      FAULT_KINDS.map((k) => {
        const m = faults.get(k)!;
        const by = [...m.entries()].sort((a, b) => b[1] - a[1]).map(([a, c]) => `${a} ${c}`);
        return `${k} ${sum(m)}${by.length ? ` (${by.join(', ')})` : ''}`;
      }).join('\n'),
    stop: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      agent.destroy();
    },
  };
}
