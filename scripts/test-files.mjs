// Lists the compiled test files (dist/test/**/*.test.js), sorted, for `node --test`: Node 22 and
// later take files or globs, not a folder (Node 20 took the folder). `zz-` files sort last.
import { readdirSync } from 'node:fs';
import { join } from 'node:path';

const root = process.argv[2] ?? 'dist/test';
const out = [];
const walk = (dir) => {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) walk(p);
    else if (e.name.endsWith('.test.js')) out.push(p);
  }
};
walk(root);
process.stdout.write(out.sort().join('\n') + '\n');
