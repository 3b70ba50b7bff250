import type { Config } from '../config/config.js';
import { GitRunner } from './git-runner.js';

/**
 * The git runner that fetches settings (`ct settings pull`, fleet workers): the user's
 * environment (git config, SSH agent, credential helpers) plus the token of `git.token`
 * (GH_TOKEN/GITHUB_TOKEN), offered only to `git.token_hosts` and hidden in every message.
 */
export function settingsGitRunner(config: Config, env: NodeJS.ProcessEnv): GitRunner {
  const token = config.git.token;
  return new GitRunner({
    timeoutSeconds: config.git.timeout,
    env,
    credentials: token
      ? config.git.token_hosts.map((prefix) => ({ prefix: prefix.replace(/\/+$/, ''), username: 'x-access-token', password: token }))
      : [],
    secrets: token ? [token] : [],
  });
}
