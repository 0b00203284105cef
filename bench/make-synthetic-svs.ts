import path from 'node:path';
import { parseArgs } from 'node:util';
import { writeSyntheticSvs } from './synthetic-svs';

/**
 * Writes a large synthetic Aperio SVS for benchmarks (see synthetic-svs.ts). From the repository
 * root, after `npm run build`:
 *   node dist/bench/make-synthetic-svs.js --out /tmp/synthetic-50k.svs [--width 50000 --height 50000]
 *     [--source ../shared/data/wsi/CMU-1-Small-Region.svs] [--lower-levels 4,16 | --lower-levels none]
 */
const { values } = parseArgs({
  options: {
    out: { type: 'string' },
    width: { type: 'string', default: '50000' },
    height: { type: 'string', default: '50000' },
    source: { type: 'string', default: '../shared/data/wsi/CMU-1-Small-Region.svs' },
    'lower-levels': { type: 'string', default: '4,16' },
  },
});
if (values.out === undefined) throw new Error('--out FILE is required');
const lowerLevels = values['lower-levels'] === 'none' ? [] : values['lower-levels'].split(',').map(Number);

async function main(out: string): Promise<void> {
  const started = performance.now();
  const report = await writeSyntheticSvs({
    source: path.resolve(values.source),
    out: path.resolve(out),
    width: Number(values.width),
    height: Number(values.height),
    lowerLevels,
  });
  const seconds = (performance.now() - started) / 1000;
  const rssMiB = process.resourceUsage().maxRSS / 1024;
  console.log(
    JSON.stringify({ out, ...report, seconds: Number(seconds.toFixed(1)), peakRssMiB: Math.round(rssMiB) }),
  );
}

main(values.out).catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
