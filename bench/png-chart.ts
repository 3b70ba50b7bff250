/**
 * Grouped bar charts (median bars, min–max whiskers) written as a PNG. Hand-written on purpose:
 * a bench chart needs rectangles, lines and a bitmap font, and no dependency should come with
 * `npm run bench`. PNG is RGB, 8 bits, one IDAT deflated with node:zlib.
 */
import { deflateSync } from 'node:zlib';
import { GLYPH_HEIGHT, GLYPH_WIDTH, glyph } from './font-5x7.js';

type Rgb = [number, number, number];

export interface Bar {
  median: number;
  min: number;
  max: number;
}

export interface Panel {
  title: string;
  /** Category labels, one per group. */
  groups: string[];
  /** Series name -> one bar per group (undefined = not measured). */
  series: Array<{ name: string; color: Rgb; bars: Array<Bar | undefined> }>;
}

class Canvas {
  readonly data: Uint8Array;
  constructor(
    readonly width: number,
    readonly height: number,
  ) {
    this.data = new Uint8Array(width * height * 3).fill(255);
  }

  rect(x: number, y: number, w: number, h: number, c: Rgb): void {
    const x0 = Math.max(0, Math.round(x));
    const y0 = Math.max(0, Math.round(y));
    const x1 = Math.min(this.width, Math.round(x + w));
    const y1 = Math.min(this.height, Math.round(y + h));
    for (let yy = y0; yy < y1; yy++) {
      for (let xx = x0; xx < x1; xx++) {
        const i = (yy * this.width + xx) * 3;
        this.data[i] = c[0];
        this.data[i + 1] = c[1];
        this.data[i + 2] = c[2];
      }
    }
  }

  /** Draws text with its top-left corner at (x, y); returns its width. */
  text(x: number, y: number, s: string, scale: number, c: Rgb): number {
    let cx = x;
    for (const ch of s) {
      const rows = glyph(ch);
      rows.forEach((row, ry) => {
        for (let rx = 0; rx < GLYPH_WIDTH; rx++) if (row[rx] === '#') this.rect(cx + rx * scale, y + ry * scale, scale, scale, c);
      });
      cx += (GLYPH_WIDTH + 1) * scale;
    }
    return cx - x;
  }

  png(): Buffer {
    const raw = Buffer.alloc((this.width * 3 + 1) * this.height);
    for (let y = 0; y < this.height; y++) {
      raw[y * (this.width * 3 + 1)] = 0;
      raw.set(this.data.subarray(y * this.width * 3, (y + 1) * this.width * 3), y * (this.width * 3 + 1) + 1);
    }
    const ihdr = Buffer.alloc(13);
    ihdr.writeUInt32BE(this.width, 0);
    ihdr.writeUInt32BE(this.height, 4);
    ihdr.set([8, 2, 0, 0, 0], 8);
    return Buffer.concat([
      Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
      chunk('IHDR', ihdr),
      chunk('IDAT', deflateSync(raw)),
      chunk('IEND', Buffer.alloc(0)),
    ]);
  }
}

const CRC_TABLE = Array.from({ length: 256 }, (_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});

function crc32(buf: Buffer): number {
  let c = 0xffffffff;
  for (const b of buf) c = CRC_TABLE[(c ^ b) & 0xff]! ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

function chunk(type: string, body: Buffer): Buffer {
  const len = Buffer.alloc(4);
  len.writeUInt32BE(body.length);
  const tb = Buffer.concat([Buffer.from(type, 'ascii'), body]);
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(tb));
  return Buffer.concat([len, tb, crc]);
}

/** A round axis maximum at or above `v` (1, 2, 2.5 or 5 times a power of ten). */
function niceMax(v: number): number {
  if (!(v > 0)) return 1;
  const p = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

function label(v: number): string {
  return v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2);
}

const INK: Rgb = [30, 30, 30];
const GRID: Rgb = [225, 225, 225];
const WIDTH = 1200;
const PANEL_HEIGHT = 250;
const LEFT = 70;
const RIGHT = 20;

/** Renders the panels one under another, with a legend and a title line on top. */
export function renderChart(title: string, panels: Panel[]): Buffer {
  const top = 60;
  const canvas = new Canvas(WIDTH, top + panels.length * PANEL_HEIGHT + 10);
  canvas.text(LEFT, 12, title, 2, INK);
  let lx = LEFT;
  for (const s of panels[0]?.series ?? []) {
    canvas.rect(lx, 38, 14, 14, s.color);
    lx += 20 + canvas.text(lx + 20, 38, s.name, 2, INK) + 20;
  }
  panels.forEach((p, i) => drawPanel(canvas, p, top + i * PANEL_HEIGHT));
  return canvas.png();
}

function drawPanel(c: Canvas, p: Panel, y0: number): void {
  c.text(LEFT, y0 + 8, p.title, 2, INK);
  const plotTop = y0 + 34;
  const plotBottom = y0 + PANEL_HEIGHT - 34;
  const plotH = plotBottom - plotTop;
  const plotW = WIDTH - LEFT - RIGHT;
  const values = p.series.flatMap((s) => s.bars.flatMap((b) => (b ? [b.max, b.median] : []))).filter(Number.isFinite);
  const max = niceMax(Math.max(0, ...values));
  for (let t = 0; t <= 4; t++) {
    const v = (max * t) / 4;
    const y = plotBottom - (plotH * t) / 4;
    c.rect(LEFT, y, plotW, 1, GRID);
    const s = label(v);
    c.text(LEFT - 6 - s.length * 6, y - 3, s, 1, INK);
  }
  c.rect(LEFT, plotTop, 1, plotH, INK);
  c.rect(LEFT, plotBottom, plotW, 1, INK);
  const groupW = plotW / Math.max(1, p.groups.length);
  const n = p.series.length;
  const barW = Math.min(40, (groupW * 0.8) / Math.max(1, n));
  p.groups.forEach((g, gi) => {
    const gx = LEFT + gi * groupW + (groupW - barW * n) / 2;
    p.series.forEach((s, si) => {
      const b = s.bars[gi];
      if (!b || !Number.isFinite(b.median)) return;
      const x = gx + si * barW;
      const h = (plotH * b.median) / max;
      c.rect(x + 1, plotBottom - h, barW - 2, h, s.color);
      if (Number.isFinite(b.min) && Number.isFinite(b.max) && b.max > b.min) {
        const ya = plotBottom - (plotH * b.max) / max;
        const yb = plotBottom - (plotH * b.min) / max;
        const cx = x + barW / 2;
        c.rect(cx, ya, 1, yb - ya + 1, INK);
        c.rect(cx - 4, ya, 9, 1, INK);
        c.rect(cx - 4, yb, 9, 1, INK);
      }
      const v = label(b.median);
      c.text(x + barW / 2 - (v.length * 6) / 2, plotBottom - h - 10 - (b.max > b.median ? (plotH * (b.max - b.median)) / max : 0), v, 1, INK);
    });
    const lw = g.length * 6;
    c.text(LEFT + gi * groupW + (groupW - lw) / 2, plotBottom + 8, g, 1, INK);
  });
}
