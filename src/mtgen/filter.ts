import type { Candidate } from './types.js';

const pct = (x: number) => `${Math.round(x * 100)}%`;

/**
 * Stage 6: keeps an evaluated candidate whose pass rate lies in [passMin, passMax] (inclusive):
 * solvable but not trivial. Sets the candidate's stage to kept or filtered, with the reason.
 */
export function filterCandidate(c: Candidate, passMin: number, passMax: number): void {
  const scored = c.scored ?? 0;
  const band = `${pct(passMin)}-${pct(passMax)}`;
  if (scored === 0) {
    c.stage = 'filtered';
    c.reason = 'no eval epoch was scored (every one errored); see its eval log';
    return;
  }
  const rate = (c.passes ?? 0) / scored;
  if (rate < passMin) {
    c.stage = 'filtered';
    c.reason = `pass rate ${pct(rate)} (${c.passes}/${scored}) is below the band ${band}: too hard or the scorer is too strict`;
  } else if (rate > passMax) {
    c.stage = 'filtered';
    c.reason = `pass rate ${pct(rate)} (${c.passes}/${scored}) is above the band ${band}: too easy`;
  } else {
    c.stage = 'kept';
    delete c.reason;
  }
}

/** The pass rate as text (`50% (1/2)`), or `-` before eval. */
export function passRateText(c: Candidate): string {
  if (c.scored === undefined) return '-';
  if (c.scored === 0) return 'n/a (0 scored)';
  return `${pct((c.passes ?? 0) / c.scored)} (${c.passes}/${c.scored})`;
}
