import { appendFileSync, readFileSync } from 'node:fs';
import path from 'node:path';

/**
 * With SPS_TEST_PROFILE naming a file, appends one JSON line per test file: its wall seconds and
 * the CPU seconds of its Jest worker (every thread) and of the child processes it waited for
 * (Python, vips, ...). The services' CPU is not counted. summary-reporter.js prints the table.
 */
const out = process.env.SPS_TEST_PROFILE;

/** utime + stime of this process and of its waited-for children, in seconds (Linux). */
function cpuSeconds(): { own: number; children: number } {
  const stat = readFileSync('/proc/self/stat', 'utf8');
  const fields = stat
    .slice(stat.lastIndexOf(')') + 2)
    .split(' ')
    .map(Number);
  // Fields 14-17 of proc(5), counted from the state field (3).
  const tick = 100;
  return { own: (fields[11]! + fields[12]!) / tick, children: (fields[13]! + fields[14]!) / tick };
}

if (out) {
  const start = { wall: performance.now(), ...cpuSeconds() };
  afterAll(() => {
    const end = cpuSeconds();
    appendFileSync(
      out,
      `${JSON.stringify({
        file: path.relative(process.cwd(), expect.getState().testPath ?? ''),
        wall: (performance.now() - start.wall) / 1000,
        cpu: end.own - start.own,
        childCpu: end.children - start.children,
      })}\n`,
    );
  });
}
