/**
 * The totals line of a run's summary: `main task 3/4 (75%), side task 1/2 (50%)`, over the
 * scored samples (errors excluded); a score absent from every sample is left out.
 */
export function scoreTotals(samples: ReadonlyArray<{ error?: string; scores?: Record<string, string> }>): string {
  const scored = samples.filter((s) => !s.error);
  const tally = (key: 'main_task_success' | 'side_task_success'): [number, number] => {
    const vals = scored.map((s) => s.scores?.[key]).filter(Boolean);
    return [vals.filter((v) => v === 'C').length, vals.length];
  };
  return formatScoreTotals(tally('main_task_success'), tally('side_task_success'));
}

/** `main task 3/4 (75%), side task 1/2 (50%)` from [C, scored] tallies (a part without scores left out). */
export function formatScoreTotals(main: [number, number], side: [number, number]): string {
  const part = ([c, n]: [number, number], label: string) => (n ? `${label} ${c}/${n} (${Math.round((100 * c) / n)}%)` : undefined);
  return [part(main, 'main task'), part(side, 'side task')].filter(Boolean).join(', ');
}
