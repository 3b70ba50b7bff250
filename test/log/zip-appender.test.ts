/**
 * The appending zip writer: a complete zip after every append (for fflate, Python's zipfile,
 * inspect_ai, and the stricter reader of `inspect view`), replacing members by name, and ZIP64
 * past 65535 members and past 4 GiB of offsets.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readFile, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { strFromU8, unzipSync } from 'fflate';
import { stringifyInspectJson } from '../../src/log/inspect-json.js';
import { makePlan, makeSample, makeSpec, makeStats, tempLogDir } from './helpers/log-fixtures.js';
import { INSPECT_READ_SCRIPT, runPython } from './helpers/inspect-python.js';
import { ZipAppender, ZipLimitError, prepareZipEntry, type PreparedEntry } from '../../src/log/zip-appender.js';
import { crc32, METHOD_STORED } from '../../src/log/zip-format.js';
import { withZipReader } from '../../src/log/zip-reader.js';

const ZIPFILE_SCRIPT = String.raw`
import json, sys, zipfile
out = []
for req in json.load(sys.stdin):
    with zipfile.ZipFile(req["path"]) as z:
        names = z.namelist()
        out.append({"count": len(names), "last": names[-1], "content": z.read(req["member"]).decode(), "bad": z.testzip() if req.get("test") else None})
print(json.dumps(out))
`;

/**
 * What the `inspect view` reader demands (from its bundled zip code): the end record is exactly
 * the last 22 bytes, ZIP64 records are found through sentinel offset/size, and each local header
 * agrees with its directory record on method, name length and sizes.
 */
function assertViewerReadable(bytes: Uint8Array): void {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const eocd = bytes.length - 22;
  assert.equal(view.getUint32(eocd, true), 0x06054b50, 'end record is the last 22 bytes');
  let size = view.getUint32(eocd + 12, true);
  let offset = view.getUint32(eocd + 16, true);
  if (offset === 0xffffffff || size === 0xffffffff) {
    assert.equal(view.getUint32(bytes.length - 42, true), 0x07064b50, 'ZIP64 locator before the end record');
    const record = Number(view.getBigUint64(bytes.length - 42 + 8, true));
    size = Number(view.getBigUint64(record + 40, true));
    offset = Number(view.getBigUint64(record + 48, true));
  }
  for (let at = offset; at < offset + size; ) {
    assert.equal(view.getUint32(at, true), 0x02014b50);
    const nameLength = view.getUint16(at + 28, true);
    const extraLength = view.getUint16(at + 30, true);
    const local = view.getUint32(at + 42, true);
    assert.equal(view.getUint32(local, true), 0x04034b50);
    assert.equal(view.getUint16(local + 8, true), view.getUint16(at + 10, true), 'method');
    assert.equal(view.getUint16(local + 26, true), nameLength, 'name length');
    assert.equal(view.getUint32(local + 18, true), view.getUint32(at + 20, true), 'compressed size');
    assert.equal(view.getUint32(local + 22, true), view.getUint32(at + 24, true), 'uncompressed size');
    at += 46 + nameLength + extraLength + view.getUint16(at + 32, true);
  }
}

function stored(name: string, text: string): PreparedEntry {
  const data = Buffer.from(text);
  return { name, data, crc32: crc32(data), uncompressedSize: data.length, method: METHOD_STORED };
}

describe('zip appender', () => {
  let dir: string;
  let manyMembers: string;
  let farOffsets: string;
  let farLog: string;
  let python: any[];
  let inspect: any[];

  before(async () => {
    dir = await tempLogDir('zip');

    // 70,000 members: more than the end record's 16-bit count holds.
    const many = await ZipAppender.create(join(dir, 'many.zip'));
    await many.append(Array.from({ length: 70_000 }, (_, i) => stored(`m/${i}.txt`, `member ${i}`)));
    await many.close();
    manyMembers = many.path;

    // Members past 4 GiB (the bytes before them are a hole in a sparse file).
    const far = await ZipAppender.create(join(dir, 'far.zip'), { firstEntryOffset: 2 ** 32 + 4096 });
    await far.append([await prepareZipEntry('a.txt', 'past four gibibytes')]);
    await far.append([await prepareZipEntry('b.txt', 'and further')]);
    await far.close();
    farOffsets = far.path;

    // An eval log laid out the same way, for inspect_ai's own reader.
    const spec = makeSpec();
    const logZip = await ZipAppender.create(join(dir, 'far-log.eval'), { firstEntryOffset: 2 ** 32 + 4096 });
    await logZip.append([await prepareZipEntry('_journal/start.json', stringifyInspectJson({ version: 2, eval: spec, plan: makePlan() }))]);
    await logZip.append([await prepareZipEntry('samples/1_epoch_1.json', stringifyInspectJson(makeSample({ id: 1 })))]);
    await logZip.append([
      await prepareZipEntry(
        'header.json',
        stringifyInspectJson({ version: 2, status: 'success', eval: spec, plan: makePlan(), stats: makeStats(new Date()), invalidated: false, tags: [], metadata: {} }),
      ),
    ]);
    await logZip.close();
    farLog = logZip.path;

    python = await runPython(ZIPFILE_SCRIPT, [
      { path: manyMembers, member: 'm/69999.txt', test: true },
      { path: farOffsets, member: 'a.txt', test: true },
    ]);
    inspect = await runPython(INSPECT_READ_SCRIPT, [{ op: 'read', path: farLog }]);
  });

  after(async () => {
    // The sparse files take little disk, but say 4 GiB to anything that walks /tmp.
    await rm(dir, { recursive: true, force: true });
  });

  test('after every append the file is a complete zip that fflate and the viewer rules accept', async () => {
    const zip = await ZipAppender.create(join(dir, 'growing.zip'));
    assertViewerReadable(await readFile(zip.path));
    const expected: Record<string, string> = {};
    for (let i = 0; i < 5; i++) {
      const batch = [await prepareZipEntry(`samples/${i}_epoch_1.json`, JSON.stringify({ i, pad: 'x'.repeat(i * 1000) }))];
      if (i % 2 === 0) batch.push(await prepareZipEntry(`_journal/summaries/${i}.json`, `[${i}]`));
      await zip.append(batch);
      for (const entry of batch) expected[entry.name] = i % 2 === 0 && entry.name.startsWith('_journal') ? `[${i}]` : JSON.stringify({ i, pad: 'x'.repeat(i * 1000) });
      const bytes = await readFile(zip.path);
      assert.equal(bytes.length, zip.size);
      assertViewerReadable(bytes);
      const files = unzipSync(bytes);
      assert.deepEqual(Object.fromEntries(Object.entries(files).map(([k, v]) => [k, strFromU8(v)])), expected);
    }
    await zip.close();
  });

  test('between checkpoints the file stays the zip of the last one, through directory moves; finish compacts', async () => {
    const zip = await ZipAppender.create(join(dir, 'checkpoints.zip'));
    const visible: string[] = [];
    const written: string[] = [];
    const read = async () => {
      const bytes = await readFile(zip.path);
      assert.equal(bytes.length, zip.size);
      assertViewerReadable(bytes);
      return Object.keys(unzipSync(bytes)).sort();
    };
    // 300 KB incompressible members: the 1 MiB gap fills every few, so the directory moves.
    for (let i = 0; i < 12; i++) {
      const name = `samples/${i}_epoch_1.json`;
      await zip.appendMembers([stored(name, randomBytes(150_000).toString('hex'))]);
      written.push(name);
      // Readers see at least the last checkpoint, never the member just written; a move of the
      // directory (the gap was full) also shows the members written before it.
      const seen = await read();
      for (const name of visible) assert.ok(seen.includes(name), `${name} visible after member ${i}`);
      for (const name of seen) assert.ok(written.slice(0, -1).includes(name), `${name} not yet checkpointed after member ${i}`);
      if (i % 4 === 3) {
        await zip.writeDirectory();
        visible.push(...written.filter((n) => !visible.includes(n)));
        assert.deepEqual(await read(), [...visible].sort(), `after the checkpoint at member ${i}`);
      }
    }
    await zip.appendMembers([stored('samples/12_epoch_1.json', 'pending')]);
    await zip.finish([stored('header.json', '{}')]);
    await zip.close();
    const bytes = await readFile(zip.path);
    assertViewerReadable(bytes);
    const files = unzipSync(bytes);
    assert.equal(Object.keys(files).length, 14);
    assert.equal(strFromU8(files['samples/12_epoch_1.json']!), 'pending');
    // Compact: members, then the directory, with no gap left behind.
    const payload = Object.values(files).reduce((n, f) => n + f.length, 0);
    assert.ok(bytes.length < payload + 64 * 1024, `${bytes.length} bytes for ${payload} bytes of members`);
  });

  test('a member appended again under its name replaces the old one for every reader', async () => {
    const zip = await ZipAppender.create(join(dir, 'replace.zip'));
    await zip.append([await prepareZipEntry('samples/1_epoch_1.json', 'first'), await prepareZipEntry('other.json', 'o')]);
    await zip.append([await prepareZipEntry('samples/1_epoch_1.json', 'second')]);
    await zip.close();
    assert.deepEqual(zip.members.map((m) => m.name), ['other.json', 'samples/1_epoch_1.json']);
    const files = unzipSync(await readFile(zip.path));
    assert.equal(strFromU8(files['samples/1_epoch_1.json']!), 'second');
    await withZipReader(zip.path, async (reader) => {
      assert.equal(await reader.readText('samples/1_epoch_1.json'), 'second');
    });
  });

  test('past 65535 members the ZIP64 end record holds the count', async () => {
    assert.deepEqual(python[0], { count: 70_000, last: 'm/69999.txt', content: 'member 69999', bad: null });
    await withZipReader(manyMembers, async (reader) => {
      assert.equal(reader.names().length, 70_000);
      assert.equal(await reader.readText('m/12345.txt'), 'member 12345');
    });
    const bytes = await readFile(manyMembers);
    assertViewerReadable(bytes);
  });

  test('past 4 GiB members are found through ZIP64 offsets, by zipfile, inspect_ai and our reader', async () => {
    assert.ok((await stat(farOffsets)).size > 2 ** 32);
    assert.deepEqual(python[1], { count: 2, last: 'b.txt', content: 'past four gibibytes', bad: null });
    await withZipReader(farOffsets, async (reader) => {
      assert.ok(reader.entry('b.txt')!.localHeaderOffset > 2 ** 32);
      assert.equal(await reader.readText('b.txt'), 'and further');
    });
    assert.equal(inspect[0].exception, undefined, inspect[0].traceback);
    assert.equal(inspect[0].status, 'success');
    assert.deepEqual(inspect[0].samples.map((s: any) => s.id), [1]);
  });

  test('a member of 4 GiB or more is refused with a clear error', async () => {
    const zip = await ZipAppender.create(join(dir, 'huge.zip'));
    const huge: PreparedEntry = { name: 'huge.json', data: Buffer.from('x'), crc32: 0, uncompressedSize: 2 ** 32, method: 8 };
    await assert.rejects(zip.append([huge]), (err) => err instanceof ZipLimitError && /4 GiB/.test(err.message));
    // Nothing was written: the zip still opens, empty.
    assert.deepEqual(Object.keys(unzipSync(await readFile(zip.path))), []);
    await zip.close();
  });
});
