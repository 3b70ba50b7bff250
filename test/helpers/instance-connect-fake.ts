import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';

export interface PushedKey {
  instanceId: string;
  user: string;
  publicKey: string;
  pushedAt: number;
  expiresAt: number;
}

export interface InstanceConnectFake {
  /** http://127.0.0.1:PORT, for AWS_ENDPOINT_URL_EC2_INSTANCE_CONNECT. */
  url: string;
  pushes: PushedKey[];
  /** How long a pushed key is accepted (EC2 Instance Connect: 60 s). */
  lifetimeMs: number;
  /** Moves the fake's clock forward, so lifetimes pass without sleeping. */
  advance(ms: number): void;
  /** Keys currently accepted for a user (on any instance, or the given one). */
  validKeys(user: string, instanceId?: string): string[];
  /** A shell script for sshd's AuthorizedKeysCommand (`$1` = user) asking this server. */
  authorizedKeysScript(): string;
  stop(): Promise<void>;
}

export interface InstanceConnectFakeOptions {
  /**
   * The instance's state as EC2 knows it (e.g. from moto) in the request's region (taken from
   * the SigV4 credential scope); undefined when it does not exist.
   */
  instanceState?: (instanceId: string, region: string) => Promise<string | undefined>;
}

/**
 * A local server speaking the EC2 Instance Connect API (AWS JSON 1.1,
 * `X-Amz-Target: AWSEC2InstanceConnectService.SendSSHPublicKey`): it records each pushed key
 * with its 60-second lifetime and, like the agent on a real instance, hands sshd the keys that
 * are still valid (GET /authorized-keys?user=NAME).
 */
export async function startInstanceConnectFake(options: InstanceConnectFakeOptions = {}): Promise<InstanceConnectFake> {
  let offset = 0;
  const now = () => Date.now() + offset;
  const fake = {
    url: '',
    pushes: [] as PushedKey[],
    lifetimeMs: 60_000,
    advance(ms: number) {
      offset += ms;
    },
    validKeys(user: string, instanceId?: string) {
      return fake.pushes
        .filter((p) => p.user === user && (!instanceId || p.instanceId === instanceId) && p.expiresAt > now())
        .map((p) => p.publicKey);
    },
    authorizedKeysScript() {
      // Node is the one HTTP client sure to be on the machine running the tests.
      const fetchKeys = `fetch(process.argv[1]).then((r) => r.text()).then((t) => process.stdout.write(t), () => process.exit(1))`;
      return `#!/bin/sh\nexec '${process.execPath}' -e '${fetchKeys}' "${fake.url}/authorized-keys?user=$1"\n`;
    },
    stop: async () => {},
  };

  const fail = (res: ServerResponse, status: number, type: string, message: string) => {
    res.writeHead(status, { 'content-type': 'application/x-amz-json-1.1', 'x-amzn-errortype': type, 'x-amzn-requestid': randomUUID() });
    res.end(JSON.stringify({ __type: type, message }));
  };

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const url = new URL(req.url ?? '/', 'http://x');
    if (req.method === 'GET' && url.pathname === '/authorized-keys') {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end(fake.validKeys(url.searchParams.get('user') ?? '').map((k) => `${k}\n`).join(''));
      return;
    }
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const target = req.headers['x-amz-target'];
    if (req.method !== 'POST' || target !== 'AWSEC2InstanceConnectService.SendSSHPublicKey') {
      return fail(res, 400, 'UnknownOperationException', `unsupported operation ${String(target)}`);
    }
    const scope = /^AWS4-HMAC-SHA256 Credential=[^/]+\/\d{8}\/([a-z0-9-]+)\/ec2-instance-connect\/aws4_request/.exec(
      String(req.headers.authorization ?? ''),
    );
    if (!scope) return fail(res, 403, 'MissingAuthenticationTokenException', 'request is not signed for ec2-instance-connect');
    const region = scope[1]!;
    let body: { InstanceId?: string; InstanceOSUser?: string; SSHPublicKey?: string };
    try {
      body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    } catch {
      return fail(res, 400, 'SerializationException', 'body is not JSON');
    }
    const { InstanceId, InstanceOSUser, SSHPublicKey } = body;
    if (!InstanceId || !/^i-[0-9a-f]{8,17}$/.test(InstanceId)) return fail(res, 400, 'InvalidArgsException', 'bad InstanceId');
    if (!InstanceOSUser || !/^[a-z_][a-z0-9_-]{0,31}$/.test(InstanceOSUser)) return fail(res, 400, 'InvalidArgsException', 'bad InstanceOSUser');
    if (!SSHPublicKey || !/^(ssh-ed25519|ssh-rsa|ecdsa-sha2-nistp\d+) [A-Za-z0-9+/=]+( .*)?$/.test(SSHPublicKey.trim())) {
      return fail(res, 400, 'InvalidArgsException', 'SSHPublicKey is not an OpenSSH public key');
    }
    if (options.instanceState) {
      const state = await options.instanceState(InstanceId, region);
      if (!state) return fail(res, 400, 'EC2InstanceNotFoundException', `instance ${InstanceId} not found`);
      if (state !== 'running') return fail(res, 400, 'EC2InstanceStateInvalidException', `instance ${InstanceId} is ${state}`);
    }
    const at = now();
    const [type, blob] = SSHPublicKey.trim().split(' ');
    fake.pushes.push({ instanceId: InstanceId, user: InstanceOSUser, publicKey: `${type} ${blob}`, pushedAt: at, expiresAt: at + fake.lifetimeMs });
    const requestId = randomUUID();
    res.writeHead(200, { 'content-type': 'application/x-amz-json-1.1', 'x-amzn-requestid': requestId });
    res.end(JSON.stringify({ RequestId: requestId, Success: true }));
  };

  const server: Server = createServer((req, res) => {
    handle(req, res).catch((e) => fail(res, 500, 'ServiceException', String(e)));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  fake.url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  fake.stop = () => new Promise<void>((r) => server.close(() => r()));
  return fake;
}

/** A server answering every GET with `text` (e.g. a what-is-my-IP service). */
export async function startTextServer(text: string): Promise<{ url: string; hits: number; stop(): Promise<void> }> {
  const s = {
    url: '',
    hits: 0,
    stop: async () => {},
  };
  const server = createServer((_req, res) => {
    s.hits++;
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.end(`${text}\n`);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  s.url = `http://127.0.0.1:${(server.address() as { port: number }).port}/`;
  s.stop = () => new Promise<void>((r) => server.close(() => r()));
  return s;
}
