/**
 * A hand-written ustar writer (no tar package is among our dependencies): owner 0, mtime 0,
 * long names split into prefix and name. Used where every header field must be ours: the
 * deterministic `--extra-src` artifacts, and the files ct hands the engine to put in a container.
 */

/** Thrown for a path or link ustar cannot hold; callers say which input it was. */
export class TarPathError extends Error {}

export interface TarEntry {
  /** The path inside the archive (no leading slash); a directory's without its trailing slash. */
  path: string;
  /** `0` a file, `2` a symbolic link, `5` a directory. */
  type: '0' | '2' | '5';
  mode: number;
  data?: Buffer;
  link?: string;
}

/** A ustar header block. */
export function tarHeader(path: string, o: { size: number; mode: number; type: '0' | '2' | '5'; link?: string }): Buffer {
  const h = Buffer.alloc(512);
  let name = o.type === '5' ? `${path}/` : path;
  let prefix = '';
  if (Buffer.byteLength(name) > 100) {
    const cut = name.lastIndexOf('/', name.length - 2);
    // ustar keeps at most 155 bytes of folder and 100 of name.
    for (let i = cut; i > 0; i = name.lastIndexOf('/', i - 1)) {
      if (Buffer.byteLength(name.slice(0, i)) <= 155 && Buffer.byteLength(name.slice(i + 1)) <= 100) {
        prefix = name.slice(0, i);
        name = name.slice(i + 1);
        break;
      }
    }
    if (!prefix) throw new TarPathError(`the path ${path} is too long for a tar archive (at most 155 bytes of folders and 100 of file name)`);
  }
  if (o.link !== undefined && Buffer.byteLength(o.link) > 100) throw new TarPathError(`the link ${path} points to a path too long for a tar archive`);
  h.write(name, 0, 100, 'utf8');
  h.write(octal(o.mode, 8), 100);
  h.write(octal(0, 8), 108);
  h.write(octal(0, 8), 116);
  h.write(octal(o.size, 12), 124);
  h.write(octal(0, 12), 136);
  h.fill(' ', 148, 156);
  h.write(o.type, 156);
  if (o.link) h.write(o.link, 157, 100, 'utf8');
  h.write('ustar\u000000', 257, 'binary');
  h.write(prefix, 345, 155, 'utf8');
  let sum = 0;
  for (const b of h) sum += b;
  h.write(`${sum.toString(8).padStart(6, '0')}\u0000 `, 148, 'binary');
  return h;
}

/** The header, body and padding blocks of one entry. */
export function tarEntryBlocks(e: TarEntry): Buffer[] {
  const body = e.type === '0' ? (e.data ?? Buffer.alloc(0)) : Buffer.alloc(0);
  const blocks = [tarHeader(e.path, { size: body.length, mode: e.mode, type: e.type, link: e.link })];
  if (body.length > 0) blocks.push(body, Buffer.alloc((512 - (body.length % 512)) % 512));
  return blocks;
}

/** A whole archive: the entries, in order, then the two zero blocks that end it. */
export function tarArchive(entries: readonly TarEntry[]): Buffer {
  return Buffer.concat([...entries.flatMap(tarEntryBlocks), Buffer.alloc(1024)]);
}

function octal(n: number, width: number): string {
  return `${n.toString(8).padStart(width - 1, '0')}\u0000`;
}
