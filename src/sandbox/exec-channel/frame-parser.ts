/** What the agent says on its control stream, one event per frame (see CHANNEL_AGENT). */
export type AgentFrame =
  /**
   * `mode`: how the agent's answers travel: the docker exec's streams (stdout through a file for
   * `file`) or, after a direct hello, the host's socket. `direct`: it can take a D request.
   */
  | { type: 'hello'; pid: number; setsid: boolean; mode: 'stream' | 'file' | 'direct'; native: boolean; direct: boolean }
  /**
   * The native agent's `D -`: it did not connect to the socket a D request named. There is no
   * other answer (success is the direct hello on that socket); the agent never names a path.
   */
  | { type: 'direct' }
  /** A line before the hello that is not a frame: docker's own words (a warning, an error). */
  | { type: 'noise'; line: string }
  | { type: 'refused'; reason: string }
  | { type: 'not-started'; id: number }
  | { type: 'started'; id: number; pid: number; readers: [number, number] }
  | { type: 'exited'; id: number; code: number }
  /** Stdout bytes on the control stream (the native agent's way; the sh agent uses stdout). */
  | { type: 'stdout'; id: number; data: Buffer }
  | {
      type: 'result';
      id: number;
      code: number;
      /** Stdout bytes the command wrote, and how many of the last ones come on the stdout stream; undefined: uncounted, read to the end of the stream. */
      stdoutTotal?: number;
      stdoutSent?: number;
      stderrTotal: number;
      stderr: Buffer;
    };

/** A control line longer than this means the stream is out of step. */
const MAX_LINE = 512;

/**
 * Splits the agent's control stream into frames. Control lines are the agent's own ASCII; the
 * stderr payload of a result is taken by its announced length and must be followed by a
 * `Z <id>` line exactly where the length says, so a short or long payload is caught instead of
 * misread. Throws on anything out of step; the channel is then abandoned.
 */
export class FrameParser {
  private chunks: Buffer[] = [];
  private length = 0;
  /** Set while the stderr payload of a result frame is awaited. */
  private pending?: Omit<Extract<AgentFrame, { type: 'result' }>, 'stderr' | 'type'> & { stderrSent: number };
  /** Set while the bytes of an O frame are awaited. */
  private pendingStdout?: { id: number; size: number };
  private greeted = false;

  push(chunk: Buffer): AgentFrame[] {
    this.chunks.push(chunk);
    this.length += chunk.length;
    const frames: AgentFrame[] = [];
    for (;;) {
      const frame = this.next();
      if (!frame) return frames;
      frames.push(frame);
    }
  }

  private next(): AgentFrame | undefined {
    if (this.pendingStdout) {
      const { id, size } = this.pendingStdout;
      if (this.length < size) return undefined;
      this.pendingStdout = undefined;
      return { type: 'stdout', id, data: this.take(size) };
    }
    if (this.pending) {
      const p = this.pending;
      const need = p.stderrSent;
      if (this.length < need + 1) return undefined;
      const nl = this.indexOfNewline(need);
      if (nl < 0) {
        if (this.length - need > MAX_LINE) throw new Error(`result ${p.id}: no trailer after ${need} payload bytes`);
        return undefined;
      }
      const stderr = this.take(need);
      const trailer = this.take(nl - need + 1).toString('latin1');
      if (trailer !== `Z ${p.id}\n`) throw new Error(`result ${p.id}: expected trailer, got ${JSON.stringify(trailer.slice(0, 40))}`);
      this.pending = undefined;
      const { stderrSent: _, ...rest } = p;
      return { type: 'result', ...rest, stderr };
    }
    const nl = this.indexOfNewline(0);
    if (nl < 0) {
      if (this.length > MAX_LINE) throw new Error('control line too long');
      return undefined;
    }
    const line = this.take(nl + 1).toString('latin1').slice(0, -1);
    if (this.greeted) return this.parseLine(line);
    try {
      const frame = this.parseLine(line);
      if (frame?.type === 'hello') this.greeted = true;
      return frame;
    } catch {
      return { type: 'noise', line };
    }
  }

  private parseLine(line: string): AgentFrame | undefined {
    const [tag, ...f] = line.split(' ');
    const bad = () => new Error(`malformed frame: ${JSON.stringify(line.slice(0, 80))}`);
    const ints = (count: number, unknownAt: number[] = []) => {
      if (f.length !== count) throw bad();
      return f.map((x, i) => {
        if (/^\d+$/.test(x)) return Number(x);
        if (x === '?' && unknownAt.includes(i)) return undefined;
        throw bad();
      });
    };
    switch (tag) {
      case 'H': {
        // sh: `H 1 pid setsid stream|file`; native: `... stream native [direct]`, `... direct native`
        const native = f[4] === 'native';
        const ok =
          f[0] === '1' &&
          /^\d+$/.test(f[1] ?? '') &&
          (f.length === 4
            ? f[3] === 'stream' || f[3] === 'file'
            : native && ((f[3] === 'stream' && (f.length === 5 || (f.length === 6 && f[5] === 'direct'))) || (f[3] === 'direct' && f.length === 5)));
        if (!ok) throw new Error(`unsupported agent: ${JSON.stringify(line.slice(0, 80))}`);
        const mode = f[3] as 'stream' | 'file' | 'direct';
        return { type: 'hello', pid: Number(f[1]), setsid: f[2] !== '-', mode, native, direct: f[5] === 'direct' };
      }
      case 'D':
        if (!this.greeted || f.length !== 1 || f[0] !== '-') throw bad();
        return { type: 'direct' };
      case 'E':
        return { type: 'refused', reason: f.join(' ') };
      case 'F':
        return { type: 'not-started', id: ints(1)[0]! };
      case 'P': {
        const [id, pid, r1, r2] = ints(4);
        return { type: 'started', id: id!, pid: pid!, readers: [r1!, r2!] };
      }
      case 'O': {
        const [id, size] = ints(2);
        if (!this.greeted) throw bad();
        this.pendingStdout = { id: id!, size: size! };
        return this.next();
      }
      case 'X': {
        const [id, code] = ints(2);
        return { type: 'exited', id: id!, code: code! };
      }
      case 'R': {
        const [id, code, stdoutTotal, stdoutSent, stderrTotal, stderrSent] = ints(6, [2, 3]);
        if ((stdoutTotal === undefined) !== (stdoutSent === undefined)) throw bad();
        this.pending = { id: id!, code: code!, stdoutTotal, stdoutSent, stderrTotal: stderrTotal!, stderrSent: stderrSent! };
        return this.next();
      }
      default:
        throw new Error(`unknown frame: ${JSON.stringify(line.slice(0, 80))}`);
    }
  }

  /** Position of the first newline at or after `from`, looking at most MAX_LINE bytes ahead. */
  private indexOfNewline(from: number): number {
    let base = 0;
    const end = Math.min(this.length, from + MAX_LINE + 1);
    for (const c of this.chunks) {
      if (base + c.length > from) {
        const start = Math.max(0, from - base);
        const stop = Math.min(c.length, end - base);
        const i = c.subarray(start, stop).indexOf(10);
        if (i >= 0) return base + start + i;
      }
      base += c.length;
      if (base >= end) break;
    }
    return -1;
  }

  private take(n: number): Buffer {
    if (n === 0) return Buffer.alloc(0);
    const parts: Buffer[] = [];
    let left = n;
    while (left > 0) {
      const c = this.chunks[0]!;
      if (c.length <= left) {
        parts.push(c);
        this.chunks.shift();
        left -= c.length;
      } else {
        parts.push(c.subarray(0, left));
        this.chunks[0] = c.subarray(left);
        left = 0;
      }
    }
    this.length -= n;
    return parts.length === 1 ? parts[0]! : Buffer.concat(parts, n);
  }
}
