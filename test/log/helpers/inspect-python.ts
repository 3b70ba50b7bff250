/**
 * Runs Python scripts against the real `inspect_ai` package (from PyPI). Each call starts one
 * interpreter (about a second), so a test file batches its questions into one call.
 */
export { runPython } from '../../helpers/python.js';

/**
 * Reads logs with inspect_ai and describes what it saw. Input: a list of requests
 *   {op: "read" | "header" | "summaries" | "list", path} or {op: "sample", path, id, epoch};
 * output: one result per request, or {"exception": "..."} when inspect_ai raised.
 */
export const INSPECT_READ_SCRIPT = String.raw`
import json, sys, traceback
from inspect_ai.log import read_eval_log, read_eval_log_sample, read_eval_log_sample_summaries, list_eval_logs

def score(s):
    return {"value": s.value, "explanation": s.explanation}

def sample(s):
    return {
        "id": s.id, "epoch": s.epoch,
        "roles": [m.role for m in s.messages],
        "tool_calls": [[c.function for c in (m.tool_calls or [])] for m in s.messages if m.role == "assistant"],
        "tool_errors": [m.error.type for m in s.messages if m.role == "tool" and m.error],
        "events": [e.event for e in s.events],
        "scores": None if s.scores is None else {k: score(v) for k, v in s.scores.items()},
        "error": s.error.message if s.error else None,
        "completion": s.output.completion,
        "model_usage": {k: v.total_tokens for k, v in s.model_usage.items()},
        "attachments": len(s.attachments),
        "uuid": s.uuid,
    }

def log(l):
    return {
        "status": l.status, "version": l.version,
        "task": l.eval.task, "task_id": l.eval.task_id, "model": l.eval.model, "created": l.eval.created,
        "dataset_samples": l.eval.dataset.samples,
        "plan": [s.solver for s in l.plan.steps],
        "samples": None if l.samples is None else [sample(s) for s in l.samples],
        "results": None if l.results is None else {
            "total_samples": l.results.total_samples,
            "completed_samples": l.results.completed_samples,
            "scores": [{"name": s.name, "scorer": s.scorer, "reducer": s.reducer,
                        "scored_samples": s.scored_samples, "unscored_samples": s.unscored_samples,
                        "metrics": {k: m.value for k, m in s.metrics.items()}} for s in l.results.scores],
        },
        "reductions": None if l.reductions is None else [
            {"scorer": r.scorer, "samples": [{"sample_id": x.sample_id, "value": x.value} for x in r.samples]} for r in l.reductions],
        "error": l.error.message if l.error else None,
        "stats": {"started_at": l.stats.started_at, "completed_at": l.stats.completed_at,
                  "model_usage": {k: v.total_tokens for k, v in l.stats.model_usage.items()}},
        "tags": l.tags, "metadata": l.metadata,
    }

def run(r):
    op = r["op"]
    if op == "read": return log(read_eval_log(r["path"]))
    if op == "header": return log(read_eval_log(r["path"], header_only=True))
    if op == "sample": return sample(read_eval_log_sample(r["path"], r["id"], r["epoch"]))
    if op == "summaries":
        return [{"id": s.id, "epoch": s.epoch, "error": s.error, "completed": s.completed,
                 "message_count": s.message_count,
                 "scores": None if s.scores is None else {k: v.value for k, v in s.scores.items()}}
                for s in read_eval_log_sample_summaries(r["path"])]
    if op == "list":
        return [{"name": i.name, "task": i.task, "task_id": i.task_id} for i in list_eval_logs(r["path"])]
    raise ValueError(op)

out = []
for r in json.load(sys.stdin):
    try:
        out.append(run(r))
    except Exception as e:
        out.append({"exception": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()})
print(json.dumps(out))
`;
