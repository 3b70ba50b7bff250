#!/usr/bin/env node
import { main } from '../dist/src/cli/main.js';
import { redactSecrets } from '../dist/src/config/secret-registry.js';

// Output piped into a reader that stops early (`ct ... --help | head`) is not an error of ours:
// stop quietly, as other command-line tools do.
for (const stream of [process.stdout, process.stderr]) {
  stream.on('error', (e) => {
    if (e.code === 'EPIPE') process.exit(process.exitCode ?? 0);
    throw e;
  });
}

main(process.argv).then(
  (code) => {
    process.exitCode = code;
  },
  (err) => {
    // An unexpected error's stack may quote a service's answer, and with it a key.
    console.error(redactSecrets(err?.stack ?? String(err)));
    process.exitCode = 1;
  },
);
