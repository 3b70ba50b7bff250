import { spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CT_BIN, REPO_ROOT } from '../../helpers/paths.js';

export const EXAMPLE_SETTINGS = join(REPO_ROOT, 'examples', 'settings');

export interface CtResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Variables that would let a test reach a real model or pick up the developer's settings. */
const SCRUBBED = /^(ANTHROPIC_|OPENAI_|CT_)/;

/**
 * Runs the real CLI (`node bin/ct.js ...`) in `cwd` (default: a fresh temporary folder, so no
 * `.env` or ct.config.yml of the repository applies) with a clean model environment plus `env`.
 */
export function runCt(args: string[], opts: { cwd?: string; env?: Record<string, string>; timeoutMs?: number } = {}): Promise<CtResult> {
  const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !SCRUBBED.test(k)));
  const env = { ...base, CT_SETTINGS_DIR: EXAMPLE_SETTINGS, CT_STATE_DIR: join(tmpdir(), 'ct-test-state'), ...opts.env };
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CT_BIN, ...args], { cwd: opts.cwd ?? tempDir('ct-cwd-'), env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? 150_000);
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

export function tempDir(prefix: string): string {
  return mkdtempSync(join(tmpdir(), prefix));
}

export { onlyLog } from '../../helpers/cli.js';
export { runPython } from '../../helpers/python.js';

/** Reads a whole log with inspect_ai and prints what the tests look at (one python start). */
export const INSPECT_SAMPLES_SCRIPT = String.raw`
import json, sys
from inspect_ai.log import read_eval_log
from inspect_ai.model import ContentReasoning

req = json.load(sys.stdin)
log = read_eval_log(req["path"], resolve_attachments=req.get("resolve", False))

def content_types(m):
    return [c.type for c in m.content] if isinstance(m.content, list) else ["str"]

def event(e):
    d = {"event": e.event}
    if e.event == "model":
        d.update(model=e.model, role=e.role, input_roles=[m.role for m in e.input], tools=[t.name for t in e.tools],
                 tool_choice=e.tool_choice if isinstance(e.tool_choice, str) else e.tool_choice.name,
                 config=e.config.model_dump(exclude_none=True), retries=e.retries,
                 output_model=e.output.model, usage=e.output.usage.model_dump(exclude_none=True) if e.output.usage else None,
                 time=e.output.time, call_request_keys=sorted((e.call.request or {}).keys()) if e.call else None,
                 call_response_id=(e.call.response or {}).get("id") if e.call else None,
                 input_contents=[m.text for m in e.input], error=e.error)
    if e.event == "tool":
        d.update(function=e.function, arguments=e.arguments, error=e.error.type if e.error else None, result=str(e.result)[:200])
    if e.event == "sample_limit":
        d.update(type=e.type, message=e.message, limit=e.limit)
    return d

out = {
    "status": log.status, "model": log.eval.model,
    "stats_usage": {k: v.model_dump(exclude_none=True) for k, v in log.stats.model_usage.items()},
    "samples": [],
}
for s in log.samples:
    out["samples"].append({
        "id": s.id,
        "scores": {k: v.value for k, v in (s.scores or {}).items()},
        "error": s.error.message if s.error else None,
        "limit": s.limit.model_dump(exclude_none=True) if s.limit else None,
        "model_usage": {k: v.model_dump(exclude_none=True) for k, v in s.model_usage.items()},
        "output_completion": s.output.completion, "output_model": s.output.model,
        "messages": [{"role": m.role, "metadata": m.metadata, "content_types": content_types(m), "text": m.text,
                      "tool_calls": [c.function for c in (m.tool_calls or [])] if m.role == "assistant" else None}
                     for m in s.messages],
        "events": [event(e) for e in s.events],
        "attachments": len(s.attachments),
    })
print(json.dumps(out))
`;
