/**
 * Reads the timing facts the bench needs out of `.eval` logs, ct's and Inspect's alike. One
 * Python process reads a whole batch: zip entries with the standard library where it can
 * (ct writes DEFLATE), inspect_ai's own reader otherwise (Inspect writes zstd).
 */
import { execFile } from 'node:child_process';

export interface LoggedToolCall {
  function: string;
  /** Epoch seconds. */
  start: number;
  /** Seconds the call took (the event's working_time). */
  seconds: number;
}

export interface LoggedSample {
  id: string;
  epoch: number;
  error: string | null;
  /** True when the sample's score says correct (ct: main_task_success C; Inspect: C). */
  correct: boolean;
  /** Epoch seconds. */
  startedAt: number | null;
  completedAt: number | null;
  /** ct's sample_init event (epoch seconds). */
  sampleInitAt: number | null;
  /** The score event (epoch seconds). */
  scoreAt: number | null;
  tools: LoggedToolCall[];
  /** Set by the Inspect bench solver: seconds per call, in order. */
  callSeconds: number[] | null;
}

export interface LoggedRun {
  path: string;
  status: string;
  samples: LoggedSample[];
}

const SCRIPT = `
import json, sys, zipfile
from datetime import datetime

def ts(d):
    if d is None:
        return None
    if isinstance(d, str):
        d = datetime.fromisoformat(d.replace("Z", "+00:00"))
    return d.timestamp()

def get(o, k):
    return o.get(k) if isinstance(o, dict) else getattr(o, k, None)

def correct(scores):
    for s in (scores or {}).values():
        v = get(s, "value")
        if isinstance(v, dict):
            return v.get("main_task_success") == "C"
        return v == "C"
    return False

def message(err):
    if not err:
        return None
    return err if isinstance(err, str) else get(err, "message")

def sample_record(s, full):
    rec = {"id": str(get(s, "id")), "epoch": get(s, "epoch"), "error": message(get(s, "error")),
           "correct": correct(get(s, "scores")), "startedAt": None, "completedAt": None,
           "sampleInitAt": None, "scoreAt": None, "tools": [], "callSeconds": None}
    if not full:
        return rec
    for e in get(s, "events") or []:
        kind = get(e, "event")
        if kind == "tool" and get(e, "function") != "submit":
            rec["tools"].append({"function": get(e, "function"), "start": ts(get(e, "timestamp")), "seconds": get(e, "working_time") or 0.0})
        elif kind == "sample_init" and rec["sampleInitAt"] is None:
            rec["sampleInitAt"] = ts(get(e, "timestamp"))
        elif kind == "score":
            rec["scoreAt"] = ts(get(e, "timestamp"))
    rec["startedAt"] = ts(get(s, "started_at"))
    rec["completedAt"] = ts(get(s, "completed_at"))
    rec["callSeconds"] = (get(s, "metadata") or {}).get("bench_call_seconds")
    return rec

def read_plain(p, full):
    # DEFLATE entries (ct's logs) read with the standard library: fast even for large outputs.
    with zipfile.ZipFile(p) as z:
        names = z.namelist()
        status = json.loads(z.read("header.json")).get("status") if "header.json" in names else "started"
        if full:
            samples = [json.loads(z.read(n)) for n in names if n.startswith("samples/")]
        else:
            samples = json.loads(z.read("summaries.json"))
    return status, [sample_record(s, full) for s in samples]

def read_inspect(p, full):
    # Inspect's own reader (its logs use zstd entries).
    from inspect_ai.log import read_eval_log, read_eval_log_sample_summaries
    if full:
        log = read_eval_log(p)
        return log.status, [sample_record(s, True) for s in log.samples or []]
    head = read_eval_log(p, header_only=True)
    return head.status, [sample_record(s, False) for s in read_eval_log_sample_summaries(p)]

full = sys.argv[1] == "full"
out = []
for p in sys.argv[2:]:
    try:
        status, samples = read_plain(p, full)
    except (NotImplementedError, RuntimeError, KeyError):
        status, samples = read_inspect(p, full)
    out.append({"path": p, "status": status, "samples": samples})
print(json.dumps(out))
`;

/**
 * Reads logs. `full` gives per-call timings (events); `summary` only each sample's outcome
 * (fast even for logs of many samples with large outputs).
 */
export function readLogs(paths: string[], mode: 'full' | 'summary'): Promise<LoggedRun[]> {
  if (paths.length === 0) return Promise.resolve([]);
  return new Promise((resolve, reject) => {
    execFile('python3', ['-c', SCRIPT, mode, ...paths], { maxBuffer: 512 * 1024 * 1024 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`inspect_ai could not read the log(s): ${stderr || err.message}`));
      else resolve(JSON.parse(stdout) as LoggedRun[]);
    });
  });
}
