/**
 * A private git server for the credential tests: `git http-backend` (CGI) behind a node HTTP
 * server that demands Basic auth. It records the Authorization headers it saw, and a path under
 * /hang/ never answers (for timeouts).
 */
import { spawn } from 'node:child_process';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { isolatedEnv } from './git-fixtures.js';

export interface GitHttpServer {
  /** `http://127.0.0.1:PORT` */
  url: string;
  /** The `user:password` pairs clients sent, in order. */
  authorizations: string[];
  close(): Promise<void>;
}

/** Serves the bare repositories under projectRoot to clients that log in as user:password. */
export async function startGitHttpServer(projectRoot: string, user: string, password: string): Promise<GitHttpServer> {
  const authorizations: string[] = [];
  const hanging: ServerResponse[] = [];
  const server: Server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://localhost');
    if (url.pathname.startsWith('/hang/')) {
      hanging.push(res);
      return;
    }
    const auth = req.headers.authorization;
    const given = auth?.startsWith('Basic ') ? Buffer.from(auth.slice(6), 'base64').toString() : undefined;
    if (given !== undefined) authorizations.push(given);
    if (given !== `${user}:${password}`) {
      res.writeHead(401, { 'WWW-Authenticate': 'Basic realm="settings"' }).end('unauthorized\n');
      return;
    }
    cgi(projectRoot, req, url, res);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    authorizations,
    close: () =>
      new Promise((resolve) => {
        for (const r of hanging) r.destroy();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

function cgi(projectRoot: string, req: IncomingMessage, url: URL, res: ServerResponse): void {
  const env: NodeJS.ProcessEnv = {
    ...isolatedEnv(),
    GIT_PROJECT_ROOT: projectRoot,
    GIT_HTTP_EXPORT_ALL: '1',
    REQUEST_METHOD: req.method,
    PATH_INFO: decodeURIComponent(url.pathname),
    QUERY_STRING: url.search.replace(/^\?/, ''),
    CONTENT_TYPE: req.headers['content-type'] ?? '',
    REMOTE_USER: 'settings',
    REMOTE_ADDR: '127.0.0.1',
  };
  if (req.headers['content-length']) env.CONTENT_LENGTH = req.headers['content-length'];
  if (req.headers['content-encoding']) env.HTTP_CONTENT_ENCODING = req.headers['content-encoding'];
  if (req.headers['git-protocol']) env.GIT_PROTOCOL = String(req.headers['git-protocol']);
  const child = spawn('git', ['http-backend'], { env, stdio: ['pipe', 'pipe', 'ignore'] });
  req.pipe(child.stdin);
  const chunks: Buffer[] = [];
  child.stdout.on('data', (c: Buffer) => chunks.push(c));
  child.on('close', () => {
    const out = Buffer.concat(chunks);
    const split = out.indexOf('\r\n\r\n');
    const headerText = out.subarray(0, split).toString();
    let status = 200;
    const headers: Record<string, string> = {};
    for (const line of headerText.split('\r\n')) {
      const i = line.indexOf(':');
      const k = line.slice(0, i).trim();
      const v = line.slice(i + 1).trim();
      if (k.toLowerCase() === 'status') status = Number.parseInt(v, 10);
      else if (k) headers[k] = v;
    }
    res.writeHead(status, headers).end(out.subarray(split + 4));
  });
}
