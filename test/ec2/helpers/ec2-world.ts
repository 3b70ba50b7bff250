import { DescribeImagesCommand, DescribeInstancesCommand, DescribeSecurityGroupsCommand, EC2Client, type Instance, type SecurityGroup } from '@aws-sdk/client-ec2';
import { PutParameterCommand, SSMClient } from '@aws-sdk/client-ssm';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ctEnv } from '../../helpers/cli.js';
import { startInstanceConnectFake, startTextServer, type InstanceConnectFake } from '../../helpers/instance-connect-fake.js';
import { startMoto, type Moto } from '../../helpers/moto.js';
import { startSshd, type Sshd } from '../../helpers/sshd.js';

process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED = 'true';

/** The address the fake what-is-my-IP service reports (TEST-NET-3, never routed). */
export const CALLER_IP = '203.0.113.7';
/** The AMI parameter the tests use (moto refuses writes under the public /aws/ prefix). */
export const AMI_PARAMETER = '/ct-test/ubuntu-22.04/ami-id';

/**
 * Everything `--sandbox ec2` talks to, on loopback: moto for EC2/SSM/STS, a fake EC2 Instance
 * Connect that records pushed keys, a what-is-my-IP server, and an sshd that accepts exactly
 * the keys pushed in the last 60 s (as an instance does), with this machine's Docker behind it.
 * The CLI reaches the sshd through ec2.ssh_endpoint, never the public IP moto invents.
 */
export interface Ec2World {
  moto: Moto;
  eic: InstanceConnectFake;
  myIp: { url: string; hits: number };
  sshd?: Sshd;
  dir: string;
  amiId: string;
  ec2(region?: string): EC2Client;
  /** Environment for a `ct` child process. */
  env(extra?: Record<string, string | undefined>): NodeJS.ProcessEnv;
  instances(region?: string): Promise<Instance[]>;
  securityGroup(name?: string, region?: string): Promise<SecurityGroup | undefined>;
  startSshd(port?: number): Promise<Sshd>;
  /** Fresh moto state (and the AMI parameter again) between tests. */
  reset(): Promise<void>;
  stop(): Promise<void>;
}

export async function startEc2World(options: { sshd?: boolean; sshdPort?: number } = {}): Promise<Ec2World> {
  const moto = await startMoto();
  const clients = new Map<string, EC2Client>();
  const ec2 = (region = 'us-east-1') => {
    let c = clients.get(region);
    if (!c) {
      c = new EC2Client({ region, endpoint: moto.url, credentials: { accessKeyId: 'testing', secretAccessKey: 'testing' } });
      clients.set(region, c);
    }
    return c;
  };
  const describe = async (id: string, region: string) => {
    try {
      const r = await ec2(region).send(new DescribeInstancesCommand({ InstanceIds: [id] }));
      return r.Reservations?.[0]?.Instances?.[0];
    } catch {
      return undefined;
    }
  };
  const eic = await startInstanceConnectFake({ instanceState: async (id, region) => (await describe(id, region))?.State?.Name });
  const myIp = await startTextServer(CALLER_IP);
  const dir = mkdtempSync(join(tmpdir(), 'ct-ec2-'));
  const images = await ec2().send(new DescribeImagesCommand({}));
  const amiId = images.Images![0]!.ImageId!;
  const putAmi = async () => {
    for (const region of ['us-east-1', 'us-west-2']) {
      const ssm = new SSMClient({ region, endpoint: moto.url, credentials: { accessKeyId: 'testing', secretAccessKey: 'testing' } });
      await ssm.send(new PutParameterCommand({ Name: AMI_PARAMETER, Value: amiId, Type: 'String', Overwrite: true }));
    }
  };
  await putAmi();
  const world: Ec2World = {
    moto,
    eic,
    myIp,
    dir,
    amiId,
    ec2,
    env(extra = {}) {
      const e = ctEnv({
        AWS_ENDPOINT_URL: moto.url,
        AWS_ENDPOINT_URL_EC2_INSTANCE_CONNECT: eic.url,
        AWS_ACCESS_KEY_ID: 'testing',
        AWS_SECRET_ACCESS_KEY: 'testing',
        AWS_EC2_METADATA_DISABLED: 'true',
        AWS_CONFIG_FILE: join(dir, 'no-aws-config'),
        AWS_SHARED_CREDENTIALS_FILE: join(dir, 'no-aws-credentials'),
        CT_STATE_DIR: join(dir, 'state'),
        CT_LOG_DIR: join(dir, 'logs'),
        CT_EC2_AMI_PARAMETER: AMI_PARAMETER,
        CT_EC2_MY_IP_URL: myIp.url,
        CT_EC2_SSH_USER: world.sshd?.user ?? 'root',
        CT_EC2_SSH_ENDPOINT: world.sshd ? `127.0.0.1:${world.sshd.port}` : undefined,
        SSH_AUTH_SOCK: '',
        ...extra,
      });
      for (const k of ['AWS_PROFILE', 'AWS_SESSION_TOKEN', 'AWS_REGION', 'AWS_DEFAULT_REGION']) if (!(k in extra)) delete e[k];
      for (const [k, v] of Object.entries(e)) if (v === undefined) delete e[k];
      return e;
    },
    async instances(region = 'us-east-1') {
      const r = await ec2(region).send(new DescribeInstancesCommand({}));
      return (r.Reservations ?? []).flatMap((x) => x.Instances ?? []);
    },
    async securityGroup(name = 'linuxbench-eval-sg', region = 'us-east-1') {
      const r = await ec2(region).send(new DescribeSecurityGroupsCommand({ Filters: [{ Name: 'group-name', Values: [name] }] }));
      return r.SecurityGroups?.[0];
    },
    async startSshd(port?: number) {
      world.sshd = await startSshd({ port, authorizedKeysScript: eic.authorizedKeysScript() });
      return world.sshd;
    },
    async reset() {
      await moto.reset();
      await putAmi();
      eic.pushes.length = 0;
      myIp.hits = 0;
    },
    async stop() {
      await world.sshd?.stop();
      await eic.stop();
      await myIp.stop();
      await moto.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
  if (options.sshd !== false) await world.startSshd(options.sshdPort);
  return world;
}

export function tag(inst: Instance, key: string): string | undefined {
  return inst.Tags?.find((t) => t.Key === key)?.Value;
}
