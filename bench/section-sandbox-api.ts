/**
 * Section 4: the sandbox layer on its own, below the CLI — bench/sandbox-overhead.js run as
 * it is (exec round trip with and without the persistent channel, `docker exec`,
 * `docker compose exec`; sampleInit/sampleCleanup against compose up/down), its table folded
 * into this one. Its figures are its own statistics: median (p95) over its calls.
 */
import { join } from 'node:path';
import { runChild, tail } from './child-usage.js';
import { REPO_ROOT } from './orchestrators.js';
import type { Row } from './report.js';

export const SANDBOX_API_SECTION = 'sandbox API';

export async function sandboxApiSection(quick: boolean): Promise<{ rows: Row[]; config: string }> {
  const script = join(REPO_ROOT, 'dist', 'bench', 'sandbox-overhead.js');
  const r = await runChild([process.execPath, script, ...(quick ? ['--quick'] : [])], { cwd: REPO_ROOT, env: process.env });
  if (r.code !== 0) throw new Error(`bench/sandbox-overhead.js failed (exit ${r.code}):\n${tail(r.stderr + r.stdout)}`);
  const lines = r.stdout.split('\n');
  const config = (lines.find((l) => /^Sandbox overhead/.test(l.trim())) ?? 'bench/sandbox-overhead.js').trim().replace(/^Sandbox overhead\s*/, '');
  const rows: Row[] = [];
  for (const line of lines.filter((l) => l.startsWith('|')).slice(2)) {
    const [what, how, med, p95, vsRaw] = line.split('|').slice(1, -1).map((c) => c.trim());
    if (!what || !how || med === undefined || p95 === undefined) continue;
    const isRaw = /^raw|compose/.test(how.replace(/`/g, '')) && !/^ct/.test(how);
    const text = `${med} ms (p95 ${p95})`;
    const r2 = Number(vsRaw);
    rows.push({
      section: SANDBOX_API_SECTION,
      config: `${config.replace(/[()]/g, '')}`,
      metric: `${what}: ${how}`,
      values: {},
      text: isRaw ? { raw: text } : { ct: text },
      ratios: !isRaw && Number.isFinite(r2) ? { raw: r2 } : undefined,
    });
  }
  if (rows.length === 0) throw new Error(`bench/sandbox-overhead.js printed no table rows:\n${tail(r.stdout)}`);
  return { rows, config };
}
