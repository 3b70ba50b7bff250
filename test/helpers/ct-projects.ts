import { execFileSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';

const PROJECT_LABEL = 'com.docker.compose.project';

function labelled(kind: 'ps' | 'network' | 'volume'): string[] {
  const args =
    kind === 'ps'
      ? ['ps', '-a', '--filter', `label=${PROJECT_LABEL}`, '--format', `{{.Label "${PROJECT_LABEL}"}}`]
      : [kind, 'ls', '--filter', `label=${PROJECT_LABEL}`, '--format', `{{.Label "${PROJECT_LABEL}"}}`];
  return [...new Set(execFileSync('docker', args, { encoding: 'utf8' }).split('\n').filter((p) => p.startsWith('ct-')))];
}

/** Compose projects ct started that still have containers. */
export function ctProjects(): string[] {
  return labelled('ps');
}

/** Everything Docker still holds of one ct run: its projects' containers, networks and volumes. */
export function leftoversOfRun(runId: string): { containers: string[]; networks: string[]; volumes: string[] } {
  const mine = (projects: string[]) => projects.filter((p) => p.startsWith(`ct-${runId}-`));
  return { containers: mine(labelled('ps')), networks: mine(labelled('network')), volumes: mine(labelled('volume')) };
}

/** Run ids recorded in a state dir (runs still going, killed, or abandoned by a forced stop). */
export function runsOfState(stateDir: string): string[] {
  try {
    return readdirSync(join(stateDir, 'runs')).map((f) => f.replace('.json', ''));
  } catch {
    return [];
  }
}

/** ct projects owned by runs recorded in this state dir. */
export function projectsOfState(stateDir: string): string[] {
  const runs = runsOfState(stateDir);
  return ctProjects().filter((p) => runs.some((r) => p.startsWith(`ct-${r}-`)));
}

/** The processes running in a project's first container (empty when it has none running). */
function processesOf(project: string): string {
  const ps = execFileSync('docker', ['ps', '-q', '--filter', `label=${PROJECT_LABEL}=${project}`], { encoding: 'utf8' }).trim();
  if (!ps) return '';
  try {
    return execFileSync('docker', ['top', ps.split('\n')[0]!], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
  } catch {
    return '';
  }
}

/**
 * Waits until `n` sample projects of runs in this state dir exist and (when `running` is given)
 * run a process matching it; returns the projects.
 */
export async function waitForProjects(stateDir: string, n: number, running?: RegExp, timeoutMs = 120_000): Promise<string[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const projects = projectsOfState(stateDir);
    const ready = running ? projects.filter((p) => running.test(processesOf(p))) : projects;
    if (ready.length >= n) return projects;
    if (Date.now() > deadline) throw new Error(`no ${n} sample project(s) ${running ? `running ${running}` : ''} in time`);
    await new Promise((r) => setTimeout(r, 200));
  }
}
