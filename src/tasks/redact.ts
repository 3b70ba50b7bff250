import { redactSecrets } from '../config/secret-registry.js';

/**
 * Hides credentials in text bound for the console, an error or a file: the userinfo of any
 * `scheme://user:password@host` URL becomes `***@`, each known secret (a token from the
 * environment) becomes `***`, and so does every secret the process registered
 * (secret-registry.ts). scp-style remotes (`git@github.com:org/repo`) carry no secret and are
 * left alone.
 */
export function redact(text: string, secrets: Iterable<string | undefined> = []): string {
  let out = text.replace(/\b([A-Za-z][A-Za-z0-9+.-]*:\/\/)[^/@\s'"]+@/g, '$1***@');
  for (const s of secrets) {
    // Very short values would blank out ordinary words; a real token is never this short.
    if (s && s.length >= 4) out = out.split(s).join('***');
  }
  return redactSecrets(out);
}
