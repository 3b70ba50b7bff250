import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { passRateText } from './filter.js';
import { PRICES_AS_OF } from './prices.js';
import type { RunState } from './state.js';

/** Stage 7's report: `report.md` with each candidate's verdict, pass rate, cost and why it was dropped. */
export function writeReport(state: RunState): string {
  const s = state.data;
  const lines = [
    `# mtgen run ${s.runId}`,
    '',
    `Environment ${s.env}, side task ${s.sideTask}; model ${s.options.model}, eval model ${s.options.evalModel}, ${s.options.epochs} epoch(s), band ${Math.round(s.options.passMin * 100)}-${Math.round(s.options.passMax * 100)}%.`,
    '',
    '| candidate | verdict | pass rate | cost (USD) | reason |',
    '|---|---|---|---|---|',
    ...s.candidates.map((c) => `| ${c.id} | ${c.stage} | ${passRateText(c)} | ${c.costUsd.toFixed(4)} | ${(c.reason ?? '').replace(/\|/g, '\\|').replace(/\n/g, ' ')} |`),
    '',
    '## Model usage',
    '',
    '| stage | model | calls | input tokens | output tokens | cost (USD) |',
    '|---|---|---|---|---|---|',
    ...s.usage.map((u) => `| ${u.stage} | ${u.model} | ${u.calls} | ${u.inputTokens} | ${u.outputTokens} | ${u.costUsd.toFixed(4)} |`),
    '',
    `Total: $${state.spentUsd().toFixed(4)} (list prices as of ${PRICES_AS_OF}).`,
    '',
  ];
  const file = join(state.dir, 'report.md');
  writeFileSync(file, lines.join('\n'));
  return file;
}
