/**
 * The commands a Markdown page shows, so a test runs what the page says instead of a copy that
 * could drift: fenced blocks, the commands of shell blocks (continuation lines joined), the
 * blocks that stand for a file (first line `# NAME`), and a runner that executes commands in
 * order in one bash, keeping the variables one command sets for the next.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export interface DocBlock {
  /** The fence's info string (`bash`, `yaml`, ... or empty). */
  lang: string;
  text: string;
  /** 1-based line of the opening fence. */
  line: number;
}

export function fencedBlocks(markdown: string): DocBlock[] {
  const out: DocBlock[] = [];
  const lines = markdown.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const open = /^```(\S*)\s*$/.exec(lines[i]!);
    if (!open) continue;
    const start = i;
    const body: string[] = [];
    for (i++; i < lines.length && !/^```\s*$/.test(lines[i]!); i++) body.push(lines[i]!);
    out.push({ lang: open[1] ?? '', text: body.join('\n'), line: start + 1 });
  }
  return out;
}

/** A shell block's commands: `\`-continued lines joined with a space, blank and comment lines dropped. */
export function shellCommands(text: string): string[] {
  return text
    .replace(/\\\n\s*/g, ' ')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith('#'));
}

/** Blocks whose first line is `# NAME` (ct.config.yml, .env): the file NAME with that content. */
export function fileBlocks(markdown: string): Array<{ name: string; text: string }> {
  return fencedBlocks(markdown)
    .filter((b) => b.lang !== 'bash' && /^# [\w.-]+$/.test(b.text.split('\n')[0] ?? ''))
    .map((b) => ({ name: b.text.split('\n')[0]!.slice(2), text: `${b.text}\n` }));
}

export interface StepResult {
  command: string;
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs `commands` in order in one bash (in `cwd`, with `env`), each through `eval` so an
 * assignment (`X=$(...)`) reaches the commands after it; stops at the first that fails. Returns
 * the result of each command that ran. Asynchronous: servers in this process keep answering.
 */
export async function runShellSteps(commands: string[], o: { cwd: string; env: NodeJS.ProcessEnv; dir: string; timeoutMs: number }): Promise<StepResult[]> {
  mkdirSync(o.dir, { recursive: true });
  const script = [
    `step() { local n=$1 cmd; cmd=$(cat); { eval "$cmd"; } >"${o.dir}/$n.out" 2>"${o.dir}/$n.err" </dev/null; local rc=$?; echo "$rc" >"${o.dir}/$n.rc"; [ "$rc" = 0 ] || exit 100; }`,
    ...commands.map((c, n) => `step ${n} <<'CT_DOC_COMMAND'\n${c}\nCT_DOC_COMMAND`),
  ].join('\n');
  writeFileSync(join(o.dir, 'script.sh'), `${script}\n`);
  await new Promise<void>((resolve, reject) => {
    // Its own process group, so a timeout also ends the command it is running.
    const child = spawn('bash', [join(o.dir, 'script.sh')], { cwd: o.cwd, env: o.env, stdio: 'ignore', detached: true });
    const timer = setTimeout(() => {
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        // already gone
      }
      reject(new Error(`the commands did not finish in ${o.timeoutMs} ms (see ${o.dir})`));
    }, o.timeoutMs);
    child.on('error', reject);
    child.on('close', () => {
      clearTimeout(timer);
      resolve();
    });
  });
  const read = (f: string) => {
    try {
      return readFileSync(join(o.dir, f), 'utf8');
    } catch {
      return undefined;
    }
  };
  const out: StepResult[] = [];
  for (const [n, command] of commands.entries()) {
    const rc = read(`${n}.rc`);
    if (rc === undefined) break;
    out.push({ command, code: Number(rc.trim()), stdout: read(`${n}.out`) ?? '', stderr: read(`${n}.err`) ?? '' });
  }
  return out;
}
