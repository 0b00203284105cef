import { execFile } from 'node:child_process';
import { mkdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { parseArgs, promisify } from 'node:util';
import { systemVipsEnv } from '../compute/slide/normalize';
import { writeSyntheticSvs } from './synthetic-svs';

/**
 * Ingest's compute stages on synthetic Aperio SVS slides made from a real one (25k and 50k a
 * side by default), beside libvips building a tiled pyramid from the same file in the same run
 * (`vips tiffsave --tile --pyramid`, 512 px tiles, zstd: lossless like our store). Prints wall
 * time per stage, the pyramid's ratio to vips, and peak RSS, which must stay flat as the slide
 * grows. Run with `npm run bench:ingest [-- --sizes 25000,50000]`.
 */
const run = promisify(execFile);
const { values } = parseArgs({ options: { sizes: { type: 'string', default: '25000,50000' } } });
const sizes = values.sizes.split(',').map(Number);
const scratch = path.join(process.env.SPS_TEST_SCRATCH ?? '/tmp', 'bench-ingest');
const sharedSlide = path.join(__dirname, '..', '..', '..', 'shared', 'data', 'wsi', 'CMU-1-Small-Region.svs');

/** Wall seconds and peak RSS (MiB) of a command, from GNU time. */
async function measured(
  command: string,
  args: string[],
): Promise<{ seconds: number; peakRssMiB: number; stdout: string }> {
  const { stdout, stderr } = await run('/usr/bin/time', ['-f', 'TIME %e %M', command, ...args], {
    maxBuffer: 16 << 20,
    env: systemVipsEnv(),
  });
  const match = /TIME ([\d.]+) (\d+)/.exec(stderr);
  if (!match) throw new Error(`no timing from ${command}: ${stderr}`);
  return { seconds: Number(match[1]), peakRssMiB: Math.round(Number(match[2]) / 1024), stdout };
}

async function benchSize(side: number): Promise<void> {
  const dir = path.join(scratch, String(side));
  await rm(dir, { recursive: true, force: true });
  await mkdir(dir, { recursive: true });
  const slide = path.join(dir, 'synthetic.svs');
  await writeSyntheticSvs({ source: sharedSlide, out: slide, width: side, height: side });

  const ours = await measured(process.execPath, [
    path.join(__dirname, 'ingest-stages.js'),
    slide,
    path.join(dir, 'ours'),
  ]);
  const stages = JSON.parse(ours.stdout.trim().split('\n').at(-1)!) as Record<string, number>;
  const vips = await measured('vips', [
    'tiffsave',
    slide,
    path.join(dir, 'vips.tif'),
    '--tile',
    '--pyramid',
    '--tile-width',
    '512',
    '--tile-height',
    '512',
    '--compression',
    'zstd',
    '--level',
    '1',
    '--bigtiff',
  ]);
  const megapixels = (side * side) / 1e6;
  console.log(`\n${side} x ${side} (${megapixels.toFixed(0)} Mpx), synthetic SVS from CMU-1-Small-Region`);
  console.log(`  de-identification  ${stages.deidSeconds!.toFixed(2)} s`);
  console.log(`  probe              ${stages.probeSeconds!.toFixed(2)} s`);
  console.log(
    `  H&E pyramid        ${stages.pyramidSeconds!.toFixed(2)} s (${(megapixels / stages.pyramidSeconds!).toFixed(0)} Mpx/s)`,
  );
  console.log(`  tissue + patches   ${stages.tissueSeconds!.toFixed(2)} s (${stages.patchCount} patches)`);
  console.log(`  all stages         ${ours.seconds.toFixed(2)} s wall, peak RSS ${ours.peakRssMiB} MiB`);
  console.log(`  vips tiffsave      ${vips.seconds.toFixed(2)} s wall, peak RSS ${vips.peakRssMiB} MiB`);
  console.log(`  pyramid / vips     ${(stages.pyramidSeconds! / vips.seconds).toFixed(2)}x (target <= 1.5x)`);
  await rm(dir, { recursive: true, force: true });
}

async function main(): Promise<void> {
  for (const side of sizes) await benchSize(side);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
