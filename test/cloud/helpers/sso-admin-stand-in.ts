/**
 * IAM Identity Center's admin API for the AWS CLI: moto_server answers it, except for the
 * attributes for access control (CreateInstanceAccessControlAttributeConfiguration and
 * Update...), which moto lacks. This loopback server answers those two itself, as AWS does (an
 * empty JSON object), keeping each request's body, and hands every other request to moto.
 * The CLI reaches it through AWS_ENDPOINT_URL_SSO_ADMIN.
 */
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface SsoAdminStandIn {
  url: string;
  /** Bodies of the access-control-attribute requests, by operation name. */
  readonly requests: Array<{ operation: string; body: unknown }>;
  close(): Promise<void>;
}

const OWN = /\.(CreateInstanceAccessControlAttributeConfiguration|UpdateInstanceAccessControlAttributeConfiguration)$/;

export async function startSsoAdminStandIn(motoUrl: string): Promise<SsoAdminStandIn> {
  const moto = new URL(motoUrl);
  const requests: SsoAdminStandIn['requests'] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const own = OWN.exec(String(req.headers['x-amz-target'] ?? ''));
      if (own) {
        requests.push({ operation: own[1]!, body: JSON.parse(body.toString('utf8') || '{}') });
        res.writeHead(200, { 'content-type': 'application/x-amz-json-1.1' });
        res.end('{}');
        return;
      }
      const fwd = request({ host: moto.hostname, port: moto.port, method: req.method, path: req.url, headers: req.headers }, (up) => {
        res.writeHead(up.statusCode ?? 502, up.headers);
        up.pipe(res);
      });
      fwd.on('error', (e) => {
        res.writeHead(502);
        res.end(String(e));
      });
      fwd.end(body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
