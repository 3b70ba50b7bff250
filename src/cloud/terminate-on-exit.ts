import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

/**
 * Last-resort termination of an EC2 instance when the process exits without having cleaned up
 * (an uncaught error, process.exit from a forced Ctrl-C, a closed terminal). An 'exit' handler
 * cannot wait for promises, so it runs this file as a short child process that terminates the
 * instance (up to 30 s). SIGKILL cannot be caught: `ct sandbox cleanup --sandbox ec2` (and the
 * start of the next run from this machine) removes what such a run leaves.
 */
export function terminateOnExit(instanceId: string, region: string): () => void {
  const onExit = () => {
    spawnSync(process.execPath, [fileURLToPath(import.meta.url), instanceId, region], { stdio: 'ignore', timeout: 30_000 });
  };
  // A closed terminal sends SIGHUP, whose default action skips 'exit' handlers.
  const onHup = () => process.exit(129);
  process.on('exit', onExit);
  process.once('SIGHUP', onHup);
  return () => {
    process.off('exit', onExit);
    process.off('SIGHUP', onHup);
  };
}

async function main(instanceId: string, region: string): Promise<void> {
  // The parent copied .env's AWS settings into the environment this process inherits.
  const { applyAwsEnvironment } = await import('./aws-clients.js');
  const { createEc2Client } = await import('./ec2-clients.js');
  applyAwsEnvironment({});
  const { TerminateInstancesCommand } = await import('@aws-sdk/client-ec2');
  await createEc2Client(region, { recordAs: 'terminate-on-exit' }).send(new TerminateInstancesCommand({ InstanceIds: [instanceId] }));
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const [instanceId, region] = process.argv.slice(2);
  if (instanceId && region) {
    main(instanceId, region).catch((e) => {
      process.stderr.write(`could not terminate ${instanceId}: ${(e as Error).message}\n`);
      process.exitCode = 1;
    });
  }
}
