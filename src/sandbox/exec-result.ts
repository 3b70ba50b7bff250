import type { ExecResult } from './types.js';

/**
 * Adds the streams' original sizes (ExecResult.stdoutBytes/stderrBytes) to a result whose output
 * the EXEC_OUTPUT_LIMIT cap cut. `dropped`: bytes cut from the front; `kept`: bytes still there.
 */
export function withSizes(r: ExecResult, stdoutDropped: number, stderrDropped: number, stdoutKept: number, stderrKept: number): ExecResult {
  if (stdoutDropped > 0) r.stdoutBytes = stdoutKept + stdoutDropped;
  if (stderrDropped > 0) r.stderrBytes = stderrKept + stderrDropped;
  return r;
}
