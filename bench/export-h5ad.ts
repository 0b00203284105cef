import { execFile } from 'node:child_process';
import { mkdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { parseArgs, promisify } from 'node:util';
import { writeCellsH5ad } from '../compute/anndata';
import { writeSyntheticCellTables } from './synthetic-cells';

/**
 * `cells.h5ad` from a synthetic segmentation layer (`--cells` cells, `--markers` marker tables,
 * the real tables' columns and row groups): the Parquet tables are made first (not timed), then
 * the h5ad is written in a child process of its own, so its peak RSS (the worker thread's
 * WebAssembly heap included) is the writer's alone. Target: 1,000,000 cells in under 60 s and
 * 1 GB.
 *
 *   npm run bench:export-h5ad [-- --cells 1000000 --markers 10]
 */
const run = promisify(execFile);
const { values } = parseArgs({
  options: {
    cells: { type: 'string', default: '1000000' },
    markers: { type: 'string', default: '10' },
    // Internal: the timed write, in a child process of its own.
    phase: { type: 'string' },
  },
});
const scratch = path.join(process.env.SPS_TEST_SCRATCH ?? '/tmp', 'bench-export-h5ad');
const catalogue = ['DAPI', 'CD3', 'CD8', 'CD20', 'CD68', 'PanCK', 'Ki67', 'SMA', 'CD4', 'FOXP3'];
const markerNames = (count: number) =>
  Array.from(
    { length: count },
    (_, i) => catalogue[i % catalogue.length]! + (i < catalogue.length ? '' : `_${i}`),
  );

async function phase(cells: number, markers: number): Promise<void> {
  const tables = { instances: path.join(scratch, 'instances.parquet') };
  const started = performance.now();
  const cpu = process.cpuUsage();
  const written = await writeCellsH5ad({
    path: path.join(scratch, 'cells.h5ad'),
    instances: tables.instances,
    markers: markerNames(markers).map((name) => ({ name, path: path.join(scratch, `${name}.parquet`) })),
    mpp: 0.25,
    provenance: { bench: 'export-h5ad' },
  });
  const seconds = (performance.now() - started) / 1000;
  // CPU time (every thread of the process) says what the wall time means on a loaded machine.
  const used = process.cpuUsage(cpu);
  const cpuSeconds = (used.user + used.system) / 1e6;
  if (written.rows !== cells) throw new Error(`${written.rows} rows written, ${cells} expected`);
  const peakMiB = Math.round(process.resourceUsage().maxRSS / 1024);
  console.log(JSON.stringify({ seconds, cpuSeconds, bytes: written.sizeBytes, peakMiB }));
}

async function main(): Promise<void> {
  const cells = Number(values.cells);
  const markers = Number(values.markers);
  if (values.phase === 'h5ad') return phase(cells, markers);
  await rm(scratch, { recursive: true, force: true });
  await mkdir(scratch, { recursive: true });
  process.stdout.write(`${cells} cells, ${markers} markers: making the Parquet tables... `);
  const made = performance.now();
  writeSyntheticCellTables(scratch, cells, markerNames(markers));
  process.stdout.write(`${((performance.now() - made) / 1000).toFixed(1)} s\n`);
  const { stdout } = await run(
    process.execPath,
    [__filename, '--phase', 'h5ad', '--cells', String(cells), '--markers', String(markers)],
    { maxBuffer: 1 << 20 },
  );
  const result = JSON.parse(stdout.trim().split('\n').at(-1)!) as {
    seconds: number;
    cpuSeconds: number;
    bytes: number;
    peakMiB: number;
  };
  console.log(
    `cells.h5ad: ${result.seconds.toFixed(1)} s wall, ${result.cpuSeconds.toFixed(1)} s CPU, ` +
      `${(result.bytes / 2 ** 20).toFixed(0)} MiB, peak RSS ${result.peakMiB} MiB`,
  );
  await rm(scratch, { recursive: true, force: true });
}

main().catch((err) => {
  console.error(err);
  process.exitCode = 1;
});
