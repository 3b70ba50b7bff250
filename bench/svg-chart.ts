/**
 * The bench chart as SVG, drawn by Apache ECharts' server-side renderer (no browser, no native
 * code): one bar chart per panel, a bar per system for each configuration at its median, and a
 * whisker from min to max (a boxplot whose box collapses onto the median).
 */
import * as echarts from 'echarts';

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
  series: Array<{ name: string; color: string; bars: Array<Bar | undefined> }>;
}

const WIDTH = 900;
const PANEL_HEIGHT = 300;
const TITLE_HEIGHT = 40;

/** One SVG document: the title, then the panels one under the other. */
export function renderChart(title: string, panels: Panel[]): string {
  const parts = panels.map((panel, i) => {
    const chart = echarts.init(null, null, { renderer: 'svg', ssr: true, width: WIDTH, height: PANEL_HEIGHT });
    chart.setOption({
      animation: false,
      title: { text: panel.title, left: 'center', textStyle: { fontSize: 14 } },
      legend: { top: 24, data: panel.series.map((s) => s.name) },
      grid: { top: 60, bottom: 40, left: 70, right: 20 },
      xAxis: { type: 'category', data: panel.groups, axisLabel: { interval: 0, fontSize: 10 } },
      yAxis: { type: 'value' },
      series: panel.series.flatMap((s) => [
        { name: s.name, type: 'bar', itemStyle: { color: s.color }, data: s.bars.map((b) => (b ? b.median : null)) },
        {
          name: s.name,
          type: 'boxplot',
          itemStyle: { color: 'transparent', borderColor: '#333' },
          boxWidth: [2, 2],
          data: s.bars.map((b) => (b ? [b.min, b.median, b.median, b.median, b.max] : [])),
        },
      ]),
    });
    const svg = chart.renderToSVGString();
    chart.dispose();
    // Nested <svg> elements placed with x/y: each panel keeps its own coordinate system.
    return svg.replace('<svg ', `<svg x="0" y="${TITLE_HEIGHT + i * PANEL_HEIGHT}" `);
  });
  const height = TITLE_HEIGHT + panels.length * PANEL_HEIGHT;
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${height}" viewBox="0 0 ${WIDTH} ${height}">`,
    `<rect width="100%" height="100%" fill="#fff"/>`,
    `<text x="${WIDTH / 2}" y="26" text-anchor="middle" font-family="sans-serif" font-size="16">${escapeXml(title)}</text>`,
    ...parts,
    '</svg>',
  ].join('\n');
}

function escapeXml(s: string): string {
  return s.replace(/[<>&"]/g, (c) => ({ '<': '&lt;', '>': '&gt;', '&': '&amp;', '"': '&quot;' })[c]!);
}
