import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The repository root (tests run from dist/test/...). */
export const REPO_ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
export const FIXTURES = join(REPO_ROOT, 'test', 'fixtures');
export const CT_BIN = join(REPO_ROOT, 'bin', 'ct.js');
