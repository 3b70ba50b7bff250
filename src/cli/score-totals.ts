/**
 * The totals line of a run's summary: `main task 3/4 (75%), side task 1/2 (50%)`, over the
 * scored samples (errors excluded); a score absent from every sample is left out.
 */
export function scoreTotals(samples: ReadonlyArray<{ error?: string; scores?: Record<string, string> }>): string {
  const scored = samples.filter((s) => !s.error);
  const part = (key: 'main_task_success' | 'side_task_success', label: string) => {
    const vals = scored.map((s) => s.scores?.[key]).filter(Boolean);
    if (vals.length === 0) return undefined;
    const c = vals.filter((v) => v === 'C').length;
    return `${label} ${c}/${vals.length} (${Math.round((100 * c) / vals.length)}%)`;
  };
  return [part('main_task_success', 'main task'), part('side_task_success', 'side task')].filter(Boolean).join(', ');
}
