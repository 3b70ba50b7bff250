import { mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * Every log the suite writes goes under one root per `npm test` run (keyed by the test runner's
 * pid, which all test files share), so the last test file can read each of them with inspect_ai.
 */
export const TEST_LOG_ROOT = process.env.CT_TEST_LOG_ROOT ?? join(tmpdir(), `ct-test-logs-${process.ppid}`);

export function testLogDir(name: string): string {
  mkdirSync(TEST_LOG_ROOT, { recursive: true });
  return mkdtempSync(join(TEST_LOG_ROOT, `${name}-`));
}
