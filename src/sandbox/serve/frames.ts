/**
 * The framing of `ct sandbox serve` (see serve-protocol.ts): each frame is
 *
 *   u32 BE header length | u32 BE body length | header (UTF-8 JSON object) | body (raw bytes)
 *
 * so stdin, file contents and output travel as they are, never as base64 or text lines.
 * Hand-written: the format is eight bytes of lengths, less than a library's setup.
 */

/** The most a header may take (32 MiB: an exec's argv travels in it, up to 4 MiB, JSON-escaped); a longer one means the stream is out of step. */
export const MAX_HEADER_BYTES = 32 * 1024 * 1024;
/** The most a body may take (1 GiB): above any limit Inspect sets on files or output. */
export const MAX_BODY_BYTES = 1024 * 1024 * 1024;

export interface Frame {
  header: Record<string, unknown>;
  body: Buffer;
}

export function encodeFrame(header: Record<string, unknown>, body: Uint8Array = Buffer.alloc(0)): Buffer {
  const h = Buffer.from(JSON.stringify(header), 'utf8');
  const prefix = Buffer.alloc(8);
  prefix.writeUInt32BE(h.length, 0);
  prefix.writeUInt32BE(body.length, 4);
  return Buffer.concat([prefix, h, body]);
}

/** Splits a byte stream into frames; throws on a frame that cannot be one. */
export class FrameReader {
  private chunks: Buffer[] = [];
  private buffered = 0;

  push(chunk: Buffer): Frame[] {
    this.chunks.push(chunk);
    this.buffered += chunk.length;
    const frames: Frame[] = [];
    for (;;) {
      if (this.buffered < 8) break;
      const head = this.peek(8);
      const hLen = head.readUInt32BE(0);
      const bLen = head.readUInt32BE(4);
      if (hLen > MAX_HEADER_BYTES || bLen > MAX_BODY_BYTES) throw new Error(`frame too large (header ${hLen}, body ${bLen} bytes)`);
      if (this.buffered < 8 + hLen + bLen) break;
      const all = this.take(8 + hLen + bLen);
      const header = JSON.parse(all.subarray(8, 8 + hLen).toString('utf8')) as unknown;
      if (typeof header !== 'object' || header === null || Array.isArray(header)) throw new Error('frame header is not a JSON object');
      frames.push({ header: header as Record<string, unknown>, body: all.subarray(8 + hLen) });
    }
    return frames;
  }

  private peek(n: number): Buffer {
    if (this.chunks[0]!.length < n) this.chunks = [Buffer.concat(this.chunks)];
    return this.chunks[0]!.subarray(0, n);
  }

  private take(n: number): Buffer {
    const all = this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks);
    const rest = all.subarray(n);
    this.chunks = rest.length > 0 ? [rest] : [];
    this.buffered = rest.length;
    return all.subarray(0, n);
  }
}
