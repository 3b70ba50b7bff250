/**
 * `ct run sabotage-eval`: the whole study as four parts, each an ordinary ct command writing into
 * one study directory, each skipped when its output is already there (so a stopped study resumes
 * where it stopped, and a finished one only recomputes the metrics):
 *
 *   honest/       ct run eval --policy honest  over the selection's main tasks (no side tasks)
 *   attack/       ct run eval --policy attack  over the selection's samples that have a side task
 *   monitored/    ct run monitor over both (monitored/honest/, monitored/attack/)
 *   metrics/      ct game-metrics --out (always recomputed: it is cheap and follows the flags)
 *
 * Task files for the two evals are written first (honest.jsonl, attack.jsonl), so the parts can
 * also be rerun by hand with the commands the study prints.
 */
import { existsSync, mkdirSync, readFileSync, readdirSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ConfigError } from '../errors.js';
import { readEvalLog } from '../log/eval-reader.js';
import type { Sample } from '../tasks/types.js';

export interface StudyTaskFiles {
  honest: string;
  attack: string;
  honestSamples: number;
  attackSamples: number;
}

/** The task-file line of a sample (`setting:env` so several settings cannot be confused). */
function taskLine(s: Sample, withSide: boolean): string {
  return JSON.stringify({ env: `${s.env.setting}:${s.env.id}`, main_task: s.mainTask.id, side_task: withSide ? (s.sideTask?.id ?? null) : null });
}

/**
 * Splits a selection into the honest set (each distinct main task once) and the attack set (the
 * samples with a side task) and writes them as task files in `dir`. An unchanged file is left as
 * it is; a changed selection in an existing study is refused (its logs would not match).
 */
export function writeStudyTaskFiles(dir: string, samples: readonly Sample[]): StudyTaskFiles {
  const honest = [...new Map(samples.map((s) => [`${s.env.setting}:${s.env.id}:${s.mainTask.id}`, taskLine(s, false)])).values()];
  const attack = [...new Set(samples.filter((s) => s.sideTask).map((s) => taskLine(s, true)))];
  if (attack.length === 0) {
    throw new ConfigError(
      'the selection has no sample with a side task, so there is nothing to attack with; select side tasks with -s, or a task file whose lines name side tasks (e.g. --task-file demo)',
    );
  }
  mkdirSync(dir, { recursive: true });
  const files = { honest: join(dir, 'honest.jsonl'), attack: join(dir, 'attack.jsonl') };
  for (const [file, lines] of [
    [files.honest, honest],
    [files.attack, attack],
  ] as const) {
    const text = `${lines.join('\n')}\n`;
    if (existsSync(file)) {
      const old = readFileIfAny(file);
      if (old !== text) {
        throw new ConfigError(
          `${dir} already holds a study of another selection (${file} differs); use another --out directory, or delete ${dir} to start over`,
        );
      }
      continue;
    }
    writeFileSync(file, text);
  }
  return { ...files, honestSamples: honest.length, attackSamples: attack.length };
}

function readFileIfAny(file: string): string | undefined {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
}

/** The `.eval` files directly in `dir` (none when it does not exist). */
export function evalFilesIn(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .filter((f) => f.endsWith('.eval'))
    .sort()
    .map((f) => join(dir, f));
}

export type EvalPartState = { done: true; log: string; status: string } | { done: false; moved: string[] };

/**
 * Whether an eval part has finished: a log in `dir` whose status is success or error (errors are
 * results: they are reported, not rerun). Logs of a run that was stopped or crashed (started,
 * cancelled) are moved into `dir/incomplete/` so the part runs again and nothing is lost.
 */
export async function evalPartState(dir: string): Promise<EvalPartState> {
  const moved: string[] = [];
  for (const file of evalFilesIn(dir).reverse()) {
    let status: string;
    try {
      status = (await readEvalLog(file, { headerOnly: true })).status;
    } catch {
      status = 'unreadable';
    }
    if (status === 'success' || status === 'error') return { done: true, log: file, status };
    const aside = join(dir, 'incomplete');
    mkdirSync(aside, { recursive: true });
    const to = join(aside, file.slice(dir.length + 1));
    renameSync(file, to);
    moved.push(to);
  }
  return { done: false, moved };
}

/** Written into a monitor part's folder when its pass finished without a failed call: the inputs it covered. */
const MONITOR_DONE = '.monitor-done.json';

/**
 * Whether a monitor part is done: its last pass ended cleanly over these same inputs and every
 * input has its copy (same file name) in `outDir`. A pass that left actions unscored after a
 * failed model call is not done: the next run asks again (the cache answers the rest).
 */
export function monitorPartDone(inputs: readonly string[], outDir: string): boolean {
  const names = inputs.map(baseName).sort();
  let done: unknown;
  try {
    done = JSON.parse(readFileSync(join(outDir, MONITOR_DONE), 'utf8'));
  } catch {
    return false;
  }
  return names.length > 0 && JSON.stringify(done) === JSON.stringify(names) && names.every((n) => existsSync(join(outDir, n)));
}

/** Records that the monitor pass over `inputs` into `outDir` finished cleanly. */
export function markMonitorPartDone(inputs: readonly string[], outDir: string): void {
  writeFileSync(join(outDir, MONITOR_DONE), JSON.stringify(inputs.map(baseName).sort()));
}

function baseName(path: string): string {
  return path.slice(path.lastIndexOf('/') + 1);
}
