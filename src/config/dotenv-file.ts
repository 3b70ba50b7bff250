import { readFileSync } from 'node:fs';
import { parse as parseDotenv } from 'dotenv';
import { ConfigError } from '../errors.js';

const ASSIGNMENT = /^\s*(export\s+)?[A-Za-z_][A-Za-z0-9_.-]*\s*[=:]/;

/**
 * Reads a `.env` file. dotenv skips lines it cannot parse without a word, so a garbled line
 * would silently drop a setting; each line must be blank, a `#` comment or `NAME=value` (a quoted
 * value may span lines), else a ConfigError names the file and line.
 */
export function readDotenvFile(file: string): Record<string, string> {
  const text = readFileSync(file, 'utf8');
  let openQuote: string | undefined;
  text.split(/\r?\n/).forEach((line, i) => {
    if (openQuote) {
      if (closes(line, openQuote)) openQuote = undefined;
      return;
    }
    if (!line.trim() || line.trim().startsWith('#')) return;
    if (!ASSIGNMENT.test(line)) {
      const shown = line.length > 60 ? `${line.slice(0, 57)}...` : line;
      throw new ConfigError(`${file}:${i + 1}: not a NAME=value line: ${JSON.stringify(shown)}; fix or comment it out with #`);
    }
    const value = line.slice(line.search(/[=:]/) + 1).trimStart();
    const q = value[0];
    if ((q === '"' || q === "'" || q === '`') && !closes(value.slice(1), q)) openQuote = q;
  });
  if (openQuote) throw new ConfigError(`${file}: a value opened with ${openQuote} is never closed`);
  return parseDotenv(text);
}

function closes(text: string, quote: string): boolean {
  for (let i = 0; i < text.length; i++) {
    if (text[i] === '\\') i++;
    else if (text[i] === quote) return true;
  }
  return false;
}
