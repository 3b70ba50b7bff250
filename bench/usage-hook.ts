/**
 * Preloaded into a measured ct process (`node --import`): at exit it writes the process's own
 * CPU time (user + sys, its children excluded) and peak RSS to $CT_BENCH_USAGE_FILE. Its own CPU
 * is the orchestration overhead whatever else the machine is doing; wall time is not, on a
 * shared machine.
 */
import { writeFileSync } from 'node:fs';

const file = process.env.CT_BENCH_USAGE_FILE;
if (file) {
  process.on('exit', () => {
    const cpu = process.cpuUsage();
    writeFileSync(file, JSON.stringify({ cpuSeconds: (cpu.user + cpu.system) / 1e6, maxRssMb: process.resourceUsage().maxRSS / 1024 }));
  });
}
