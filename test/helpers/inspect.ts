import { execFile } from 'node:child_process';

/** What inspect_ai itself sees in a log: the real Python reader, not ours. */
export interface InspectView {
  path: string;
  status: string;
  task: string;
  samples: Array<{
    id: string;
    epoch: number;
    error: string | null;
    scores: Record<string, unknown>;
    roles: string[];
    events: string[];
    /** The data of the sample's info events. */
    info: unknown[];
    limit: string | null;
    /** Seconds from the sample's start to its end. */
    total_time: number | null;
  }>;
  header_status: string;
  /** `eval.config.fail_on_error`: the rule the status was judged by. */
  fail_on_error: boolean | number | null;
  results: Array<{ name: string; metrics: Record<string, number> }>;
}

const SCRIPT = `
import json, sys
from inspect_ai.log import read_eval_log
out = []
for p in sys.argv[1:]:
    log = read_eval_log(p)
    head = read_eval_log(p, header_only=True)
    out.append({
        "path": p,
        "status": log.status,
        "task": log.eval.task,
        "header_status": head.status,
        "fail_on_error": log.eval.config.fail_on_error,
        "results": [{"name": s.name, "metrics": {k: m.value for k, m in s.metrics.items()}} for s in (log.results.scores if log.results else [])],
        "samples": [{
            "id": str(s.id), "epoch": s.epoch,
            "error": s.error.message if s.error else None,
            "scores": {k: v.value for k, v in (s.scores or {}).items()},
            "roles": [m.role for m in s.messages],
            "events": [e.event for e in s.events],
            "info": [e.data for e in s.events if e.event == "info"],
            "limit": s.limit.type if s.limit else None,
            "total_time": s.total_time,
        } for s in (log.samples or [])],
    })
print(json.dumps(out))
`;

/** Reads logs with inspect_ai's `read_eval_log` (full and header-only) in one Python process. */
export function readWithInspect(paths: string[]): Promise<InspectView[]> {
  return new Promise((resolve, reject) => {
    execFile('python3', ['-c', SCRIPT, ...paths], { maxBuffer: 256 * 1024 * 1024 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`inspect_ai could not read the log(s): ${stderr || err.message}`));
      else resolve(JSON.parse(stdout) as InspectView[]);
    });
  });
}
