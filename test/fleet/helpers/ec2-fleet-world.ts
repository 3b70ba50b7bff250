/**
 * A moto account ready for EC2 workers: the worker instance profile with its role (the controller
 * refuses a profile that is missing or has no role), an image id behind the stock-Ubuntu
 * parameter and (optionally) the worker-AMI parameter. Seeded with boto3 (moto's own client
 * library), as a user would set the account up with the AWS CLI.
 */
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before } from 'node:test';
import { FAKE_AWS, fleetWorkDir } from '../../helpers/fleet.js';
import { startMoto, type Moto } from '../../helpers/moto.js';
import { runPython } from '../../helpers/python.js';
import { git } from '../../settings/helpers/git-fixtures.js';

export const UBUNTU_PARAMETER = '/ct-test/ubuntu-22.04-ami';
export const WORKER_AMI_PARAMETER = '/ct-test/worker-ami-id';

const SEED = `
import json, sys, boto3
a = json.load(sys.stdin)
kw = dict(endpoint_url=a["url"], region_name="us-east-1", aws_access_key_id=a["key"], aws_secret_access_key=a["secret"])
iam = boto3.client("iam", **kw)
try:
    iam.create_instance_profile(InstanceProfileName=a["profile"])
except iam.exceptions.EntityAlreadyExistsException:
    pass
trust = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}]}
try:
    iam.create_role(RoleName=a["profile"], AssumeRolePolicyDocument=json.dumps(trust))
except iam.exceptions.EntityAlreadyExistsException:
    pass
if not iam.get_instance_profile(InstanceProfileName=a["profile"])["InstanceProfile"]["Roles"]:
    iam.add_role_to_instance_profile(InstanceProfileName=a["profile"], RoleName=a["profile"])
images = boto3.client("ec2", **kw).describe_images(Owners=["amazon"])["Images"]
ubuntu, worker = images[0]["ImageId"], images[1]["ImageId"]
ssm = boto3.client("ssm", **kw)
ssm.put_parameter(Name=a["ubuntu"], Value=ubuntu, Type="String", Overwrite=True)
if a["worker"]:
    ssm.put_parameter(Name=a["worker"], Value=worker, Type="String", Overwrite=True)
print(json.dumps({"ubuntu": ubuntu, "worker": worker}))
`;

/**
 * Seeds moto; returns the two image ids (the worker AMI's only stored when `workerAmi`, under
 * `workerParameter`, default WORKER_AMI_PARAMETER).
 */
export async function seedEc2FleetWorld(motoUrl: string, o: { workerAmi: boolean; profile?: string; workerParameter?: string }): Promise<{ ubuntu: string; worker: string }> {
  return runPython(SEED, {
    url: motoUrl,
    key: FAKE_AWS.AWS_ACCESS_KEY_ID,
    secret: FAKE_AWS.AWS_SECRET_ACCESS_KEY,
    profile: o.profile ?? 'linuxbench-worker',
    ubuntu: UBUNTU_PARAMETER,
    worker: o.workerAmi ? (o.workerParameter ?? WORKER_AMI_PARAMETER) : '',
  });
}

/** Controller environment for EC2 workers against the seeded account. */
export const EC2_FLEET_ENV = { CT_EC2_AMI_PARAMETER: UBUNTU_PARAMETER, CT_FLEET_AMI_PARAMETER: WORKER_AMI_PARAMETER };

export interface Ec2FleetFixture {
  moto: Moto;
  dirs: ReturnType<typeof fleetWorkDir>;
  /** Client options for moto as the test's own (fake) user. */
  aws(): { region: string; endpoint: string; credentials: { accessKeyId: string; secretAccessKey: string } };
}

/**
 * Registers the suite's before/after: a moto_server, a work directory whose example setting is a
 * git repository named in its ct.config.yml (workers elsewhere pull settings by repository and
 * commit), both removed at the end. The fields are set once `before` has run.
 */
export function useEc2FleetFixture(name: string): Ec2FleetFixture {
  const f = {
    aws: () => ({ region: 'us-east-1', endpoint: f.moto.url, credentials: { accessKeyId: FAKE_AWS.AWS_ACCESS_KEY_ID, secretAccessKey: FAKE_AWS.AWS_SECRET_ACCESS_KEY } }),
  } as Ec2FleetFixture;
  before(async () => {
    f.moto = await startMoto();
    f.dirs = fleetWorkDir(name);
    const demo = join(f.dirs.settings, 'demo');
    git(demo, 'init', '-q', '-b', 'main');
    git(demo, 'add', '-A');
    git(demo, 'commit', '-q', '-m', 'demo setting');
    writeFileSync(join(f.dirs.work, 'ct.config.yml'), `settings:\n  demo:\n    repo: ${demo}\n`);
  });
  after(async () => {
    await f.moto.stop();
    rmSync(f.dirs.work, { recursive: true, force: true });
  });
  return f;
}
