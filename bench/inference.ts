import { execFile } from 'node:child_process';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { availableParallelism } from 'node:os';
import path from 'node:path';
import { parseArgs, promisify } from 'node:util';
import type { SlideImage } from '../compute/image';
import {
  finishPrediction,
  finishPredictionStore,
  inputTileLength,
  type ModelSession,
  mergeBandSummaries,
  openModelSession,
  type PatchGrid,
  type PredictMarkersResult,
  predictBand,
  predictionBandCount,
  predictMarkers,
  TilePlan,
} from '../compute/prediction';
import { inputSamples, inputWindow } from '../compute/prediction/kernels';
import { InputKernel, PlaneMemory } from '../compute/prediction/plane-kernel';
import type { PlaneKernelKind } from '../compute/prediction/plane-writers';
import { HISTOGRAM_BINS } from '../compute/prediction/store';
import { buildHePyramid, openHePyramid, readPyramidLevel } from '../compute/pyramid';
import { openTiffSlide } from '../compute/slide';
import { fileSource } from '../compute/source';
import { detectTissue, tissuePatchGrid } from '../compute/tissue';
import { folderStore, type KeyValueStore } from '../compute/zarr';
import { modelSpec } from '../models/registry';
import { cpuSeconds, median } from './cpu';
import { writeSyntheticSvs } from './synthetic-svs';

/**
 * Prediction throughput: tiles per second of the whole job path (read the H&E pyramid, infer,
 * write the Zarr store) against bare `session.run` on the same tiles and batch size, in the same
 * process and run, and the peak RSS of the prediction (and of the bare run before it, on the
 * same session), which must stay flat as the slide grows. The slide is a synthetic SVS made
 * from CMU-1-Small-Region (bench/synthetic-svs.ts), its H&E pyramid and tissue grid made as
 * ingest makes them, in a separate process first.
 *
 *   npm run bench:inference [-- --sizes 6000,12000 --batch 8 --threads 1 --markers 14 --writers N
 *                                --rounds 3 --kernel webassembly|typescript --reference DIR]
 *
 * `--writers` is the number of plane-writer threads (default: predictMarkers' own, min(4, cores
 * - 2), at least 1). The CPU per tile it prints is of every thread of the process. `--kernel`
 * picks the plane writers (predictMarkers' `kernel`).
 *
 * `--reference DIR` measures another build beside this one, on the same slide in the same run:
 * DIR is a checkout with its own build (for example `git worktree add ../sps-main main`, then
 * `npm run build` there). Each round then runs in a process of its own, this build's and the
 * reference's in turn (which goes first alternates), and the comparison printed is the median of
 * the rounds' ratios of whole-path speed.
 *
 * The bare figure cycles through the first `--bare-tiles` real tiles of the slide: the baseline
 * model's cost does not depend on pixel values, and holding every tile's input would not fit.
 *
 * A virtual machine's speed drifts by more than the margins measured here, within a run too:
 * bare runs and whole-path runs alternate (`--rounds` of the whole path, each between two bare
 * runs), each whole path is taken against the mean of the bare runs on either side of it, and
 * the ratio printed is the median of the rounds. Likewise each round's whole job in bands (the
 * service's `predictJob` bands, then `postprocessJob`) runs right after its whole path and bare
 * run, and the job's ratio to the path is the median of the rounds' (target at most 1.15).
 */
const run = promisify(execFile);
const { values } = parseArgs({
  options: {
    sizes: { type: 'string', default: '6000,12000' },
    batch: { type: 'string', default: '8' },
    threads: { type: 'string', default: '1' },
    markers: { type: 'string', default: '14' },
    writers: { type: 'string' },
    'bare-tiles': { type: 'string', default: '64' },
    rounds: { type: 'string', default: '3' },
    kernel: { type: 'string' },
    reference: { type: 'string' },
    // Leave the slide, pyramid and store in the scratch folder (profiling the measured phase).
    keep: { type: 'boolean', default: false },
    // Internal: the measured phase, in a child process of its own.
    measure: { type: 'string' },
  },
});
const scratch = path.join(process.env.SPS_TEST_SCRATCH ?? '/tmp', 'bench-inference');
const sharedSlide = path.join(__dirname, '..', '..', '..', 'shared', 'data', 'wsi', 'CMU-1-Small-Region.svs');
const spec = modelSpec('v0.7');
const peakMiB = () => Math.round(process.resourceUsage().maxRSS / 1024);

interface Prepared {
  heMpp: number;
  grid: PatchGrid;
}

/** The slide, its pyramid and its tissue grid, as ingest would leave them. */
async function prepare(dir: string, side: number): Promise<Prepared> {
  const slidePath = path.join(dir, 'synthetic.svs');
  await writeSyntheticSvs({ source: sharedSlide, out: slidePath, width: side, height: side });
  const source = await fileSource(slidePath);
  try {
    const image = await openTiffSlide(source);
    const heMpp = image.probe.effectiveMpp ?? 0.5;
    const sink = folderStore(path.join(dir, 'he'));
    const pyramid = await buildHePyramid({ image, sink, mpp: heMpp, name: 'H&E' });
    const level = Math.min(4, pyramid.levels.length - 1);
    const tissue = detectTissue(await readPyramidLevel(sink, level));
    const grid = tissuePatchGrid({
      ...tissue,
      maskDownsample: 2 ** level,
      levelWidthPx: image.widthPx,
      levelHeightPx: image.heightPx,
      mpp: heMpp,
    });
    return {
      heMpp,
      grid: {
        cols: grid.cols,
        rows: grid.rows,
        selected: grid.selected,
        patchSizeLevel0Px: grid.patchSizeLevel0Px,
      },
    };
  } finally {
    await source.close();
  }
}

/** Inputs of the first `count` selected positions, read and resampled as the predictor does. */
async function realTiles(he: SlideImage, plan: TilePlan, count: number): Promise<Float32Array> {
  const length = inputTileLength(spec);
  const positions: number[] = [];
  for (let p = 0; p < plan.positionCount && positions.length < count; p++)
    if (plan.grid.selected[p] === 1) positions.push(p);
  // Filled as the predictor fills them, in a memory of the WebAssembly kernel's.
  const memory = new PlaneMemory(spec.tileSize, HISTOGRAM_BINS);
  const kernel = new InputKernel(memory, spec.tileSize + 2 * spec.halo);
  const out = memory.planeBuffer(positions.length * length);
  for (const [k, p] of positions.entries()) {
    const sq = plan.square(p);
    const w = inputWindow(sq, spec.tileSize, spec.halo);
    const x0 = Math.max(0, w.x0);
    const y0 = Math.max(0, w.y0);
    const rgb = await he.readRegion({
      level: plan.level,
      x: x0,
      y: y0,
      width: Math.min(plan.widthPx, w.x1) - x0,
      height: Math.min(plan.heightPx, w.y1) - y0,
    });
    const ys = inputSamples(sq.y0, sq.y1 - sq.y0, spec.tileSize, spec.halo, plan.heightPx);
    const xs = inputSamples(sq.x0, sq.x1 - sq.x0, spec.tileSize, spec.halo, plan.widthPx);
    kernel.fill(rgb, x0, y0, ys, xs, out, k * length);
  }
  return out;
}

interface Timed {
  seconds: number;
  cpuSeconds: number;
}

/** Bare `session.run` on `tiles` batches of `batch`, cycling through `inputs`. */
async function bare(
  session: ModelSession,
  inputs: Float32Array,
  tiles: number,
  batch: number,
): Promise<Timed> {
  const length = inputTileLength(spec);
  const available = inputs.length / length;
  const batches: Float32Array[] = [];
  for (let k = 0; k + batch <= available; k += batch)
    batches.push(inputs.slice(k * length, (k + batch) * length));
  await session.run(batches[0]!, batch);
  const started = performance.now();
  const cpuStarted = cpuSeconds();
  let done = 0;
  for (let i = 0; done < tiles; i++) {
    const n = Math.min(batch, tiles - done);
    const input =
      n === batch
        ? batches[i % batches.length]!
        : batches[i % batches.length]!.subarray(0, n * length).slice();
    await session.run(input, n);
    done += n;
  }
  return { seconds: (performance.now() - started) / 1000, cpuSeconds: cpuSeconds() - cpuStarted };
}

/**
 * The measured phase: this process does nothing but the bare runs and the prediction, so its
 * peak RSS is theirs.
 */
async function measure(dir: string): Promise<void> {
  const { heMpp, grid } = JSON.parse(await readFile(path.join(dir, 'prepared.json'), 'utf8')) as Omit<
    Prepared,
    'grid'
  > & {
    grid: Omit<PatchGrid, 'selected'> & { selected: number[] };
  };
  const patchGrid: PatchGrid = { ...grid, selected: Uint8Array.from(grid.selected) };
  const batch = Number(values.batch);
  const session = await openModelSession(spec, { intraOpNumThreads: Number(values.threads) });
  const markers = spec.channels.slice(0, Number(values.markers));
  const he = await openHePyramid(folderStore(path.join(dir, 'he')));
  const storeRoot = path.join(dir, 'prediction');
  await rm(storeRoot, { recursive: true, force: true });
  await outlastDeletions();
  // Warm the session outside the timed part, as a long-lived worker has it warm.
  const plan = new TilePlan({
    grid: patchGrid,
    heLevels: he.levels,
    heMpp,
    modelMpp: spec.mpp,
    shardSize: 1024,
    bandShards: 4,
  });
  const inputs = await realTiles(he, plan, Number(values['bare-tiles']));
  await session.run(inputs.subarray(0, inputTileLength(spec)).slice(), 1);
  let inferred = 0;
  const counting: ModelSession = {
    spec: session.spec,
    run(input, count, output) {
      inferred += count;
      return session.run(input, count, output);
    },
  };
  // Bare runs on as many tiles as the slide has positions, before and after each whole path.
  const positions = patchGrid.selected.reduce((n, v) => n + v, 0);
  const bares = [await bare(session, inputs, positions, batch)];
  const paths: Timed[] = [];
  let result: PredictMarkersResult | undefined;
  let sink: KeyValueStore | undefined;
  let pipelinePeak = 0;
  const banded: { jobSeconds: number; afterBandsSeconds: number; jobCpuSeconds: number }[] = [];
  for (let round = 0; round < Number(values.rounds); round++) {
    // A store of its own each round: deleting the last one would slow creating the next one's
    // files (see `main`).
    sink = folderStore(path.join(storeRoot, String(round)));
    inferred = 0;
    // Opened afresh, as each job opens it: nothing of the last round's H&E is kept.
    const slide = await openHePyramid(folderStore(path.join(dir, 'he')));
    const started = performance.now();
    const cpuStarted = cpuSeconds();
    result = await predictMarkers({
      he: slide,
      heMpp,
      grid: patchGrid,
      model: counting,
      markers,
      sink,
      batchSize: batch,
      writers: values.writers === undefined ? undefined : Number(values.writers),
      kernel: kernelOption(),
    });
    paths.push({ seconds: (performance.now() - started) / 1000, cpuSeconds: cpuSeconds() - cpuStarted });
    // The first round's peak is what one job needs; later rounds add whatever the collector has
    // not yet returned of the rounds before (their writers' memory above all).
    if (round === 0) pipelinePeak = peakMiB();
    bares.push(await bare(session, inputs, positions, batch));
    // Each round's banded job right after its path and bare run: this machine's speed drifts
    // more than the margin measured, so each job is taken against the path next to it.
    banded.push(await bandedJob(dir, storeRoot, round, heMpp, patchGrid, session, markers, batch));
  }
  if (!result || !sink) throw new Error('no round ran');
  const finishStarted = performance.now();
  await finishPredictionStore({ sink, layout: result.layout, statistics: result.statistics });
  const finishSeconds = (performance.now() - finishStarted) / 1000;
  console.log(
    JSON.stringify({
      tiles: result.tiles,
      inferred,
      failed: result.failedTiles,
      heLevel: result.layout.heLevel,
      pipelineSeconds: paths.map((p) => p.seconds),
      pipelineCpuSeconds: paths.map((p) => p.cpuSeconds),
      finishSeconds,
      jobSeconds: banded.map((b) => b.jobSeconds),
      afterBandsSeconds: banded.map((b) => b.afterBandsSeconds),
      jobCpuSeconds: banded.map((b) => b.jobCpuSeconds),
      bareSeconds: bares.map((b) => b.seconds),
      bareCpuSeconds: bares.reduce((n, b) => n + b.cpuSeconds, 0) / bares.length,
      pipelinePeakMiB: pipelinePeak,
      peakMiB: peakMiB(),
    }),
  );
}

async function benchSize(side: number): Promise<void> {
  const dir = path.join(scratch, String(side));
  await rm(dir, { recursive: true, force: true });
  await mkdir(dir, { recursive: true });
  const prepared = await prepare(dir, side);
  await writeFile(
    path.join(dir, 'prepared.json'),
    JSON.stringify({ ...prepared, grid: { ...prepared.grid, selected: Array.from(prepared.grid.selected) } }),
  );
  const args = (rounds: string) => [
    '--measure',
    dir,
    '--batch',
    values.batch,
    '--threads',
    values.threads,
    '--markers',
    values.markers,
    '--bare-tiles',
    values['bare-tiles'],
    '--rounds',
    rounds,
    ...(values.writers === undefined ? [] : ['--writers', values.writers]),
  ];
  const measured = async (script: string, rounds: string, extra: string[] = []) => {
    const { stdout } = await run(process.execPath, [script, ...args(rounds), ...extra], {
      maxBuffer: 16 << 20,
    });
    return JSON.parse(stdout.trim().split('\n').at(-1)!) as Measured;
  };
  const kernel = values.kernel === undefined ? [] : ['--kernel', values.kernel];
  if (values.reference === undefined) {
    report(side, 'this build', await measured(__filename, values.rounds, kernel));
    return;
  }
  const reference = path.resolve(values.reference, 'dist', 'bench', 'inference.js');
  const current: Measured[] = [];
  const other: Measured[] = [];
  for (let round = 0; round < Number(values.rounds); round++) {
    // Alternating which goes first, so that neither always meets the machine the other left.
    if (round % 2 === 0) current.push(await measured(__filename, '1', kernel));
    other.push(await measured(reference, '1'));
    if (round % 2 === 1) current.push(await measured(__filename, '1', kernel));
  }
  report(side, 'this build', joined(current), aroundEach(current));
  report(side, `reference ${values.reference}`, joined(other), aroundEach(other));
  const speeds = current.map((m, k) => other[k]!.pipelineSeconds[0]! / m.pipelineSeconds[0]!);
  const seconds = (ms: Measured[]) => median(ms.map((m) => m.pipelineSeconds[0]!));
  // CPU per tile moves less than wall time where other work shares the cores.
  const cpuPerTile = (ms: Measured[]) =>
    (median(ms.map((m) => m.pipelineCpuSeconds[0]!)) * 1000) / ms[0]!.tiles;
  console.log(
    `\n  against reference  ${(current[0]!.tiles / seconds(current)).toFixed(1)} tiles/s here, ${(other[0]!.tiles / seconds(other)).toFixed(1)} tiles/s reference (medians): this build at ${median(speeds).toFixed(3)} of the reference's speed, median of ${speeds.map((x) => x.toFixed(3)).join(', ')}`,
  );
  console.log(
    `  CPU per tile       ${cpuPerTile(current).toFixed(2)} ms here, ${cpuPerTile(other).toFixed(2)} ms reference (whole path, medians)`,
  );
}

/** Rounds measured in processes of their own, as if one process had measured them all. */
function joined(ms: Measured[]): Measured {
  const last = ms.at(-1)!;
  return {
    ...last,
    pipelineSeconds: ms.flatMap((m) => m.pipelineSeconds),
    pipelineCpuSeconds: ms.flatMap((m) => m.pipelineCpuSeconds),
    jobSeconds: ms.flatMap((m) => m.jobSeconds),
    // A build from before the field has none.
    afterBandsSeconds: ms.flatMap((m) => m.afterBandsSeconds ?? []),
    jobCpuSeconds: ms.flatMap((m) => m.jobCpuSeconds ?? []),
    bareSeconds: ms.flatMap((m) => m.bareSeconds),
    bareCpuSeconds: ms.reduce((n, m) => n + m.bareCpuSeconds, 0) / ms.length,
    pipelinePeakMiB: Math.max(...ms.map((m) => m.pipelinePeakMiB)),
    peakMiB: Math.max(...ms.map((m) => m.peakMiB)),
  };
}

/** Per round measured in a process of its own, the mean of its bare runs before and after it. */
function aroundEach(ms: Measured[]): number[] {
  return ms.map((m) => (m.bareSeconds[0]! + m.bareSeconds[1]!) / 2);
}

/** `--kernel`, checked. */
function kernelOption(): PlaneKernelKind | undefined {
  const kernel = values.kernel;
  if (kernel === undefined || kernel === 'webassembly' || kernel === 'typescript') return kernel;
  throw new RangeError(`--kernel ${kernel}: webassembly or typescript`);
}

/** What the measured phase prints (`measure`). */
interface Measured {
  tiles: number;
  inferred: number;
  failed: number;
  heLevel: number;
  /** Per round. */
  pipelineSeconds: number[];
  pipelineCpuSeconds: number[];
  finishSeconds: number;
  /** Per round, the whole job as the service runs it: band after band (each building its lower
   * levels as it goes), then the levels above and the metadata. */
  jobSeconds: number[];
  /** Of `jobSeconds`, after the last band: the summaries merged, the levels above, the metadata. */
  afterBandsSeconds: number[];
  /** Per round, the CPU of every thread during the banded job (it moves less than wall time under load). */
  jobCpuSeconds: number[];
  /** Before the first round and after each. */
  bareSeconds: number[];
  bareCpuSeconds: number;
  /** After the first bare run and the first round. */
  pipelinePeakMiB: number;
  peakMiB: number;
}

/**
 * The whole job as `predictJob` and `postprocessJob` run it on one worker, into a store of its
 * own: every band in order, then the merged statistics and the levels the bands left.
 */
async function bandedJob(
  dir: string,
  storeRoot: string,
  round: number,
  heMpp: number,
  grid: PatchGrid,
  model: ModelSession,
  markers: readonly string[],
  batch: number,
): Promise<{ jobSeconds: number; afterBandsSeconds: number; jobCpuSeconds: number }> {
  const sink = folderStore(path.join(storeRoot, `banded-${round}`));
  const summaries = folderStore(path.join(storeRoot, `banded-summaries-${round}`));
  const options = {
    he: await openHePyramid(folderStore(path.join(dir, 'he'))),
    heMpp,
    grid,
    model,
    markers,
    sink,
    batchSize: batch,
    writers: values.writers === undefined ? undefined : Number(values.writers),
    kernel: kernelOption(),
  };
  const started = performance.now();
  const cpuStarted = cpuSeconds();
  const bands = predictionBandCount(options);
  for (let band = 0; band < bands; band++) await predictBand({ ...options, band, summaries });
  const bandsEnded = performance.now();
  const merged = await mergeBandSummaries({ ...options, summaries });
  if (!merged) throw new Error('a band left no summary');
  // The job's postprocessing, as the activity runs it.
  await finishPrediction({
    sink,
    layout: merged.layout,
    statistics: merged.statistics,
    fromLevel: merged.pyramidFrom,
    everyShardStored: merged.everyShardStored,
    model,
    writers: options.writers,
    kernel: options.kernel,
  });
  const ended = performance.now();
  return {
    jobSeconds: (ended - started) / 1000,
    afterBandsSeconds: (ended - bandsEnded) / 1000,
    jobCpuSeconds: cpuSeconds() - cpuStarted,
  };
}

/**
 * Waits until files deleted before this phase (this one's last stores, the last run's scratch)
 * no longer tax creating files. Where ext4 runs without a journal (this project's VM), creating
 * a file skips each recently deleted inode, reading its inode block: 700 files cost 515 ms of
 * CPU right after 3,000 were deleted, 80 ms once they were flushed (`sync`) and 6 s old.
 * The job writes more files than the path (its pyramid levels), so the tax fell on it most.
 */
async function outlastDeletions(): Promise<void> {
  await run('sync');
  await new Promise((resolve) => setTimeout(resolve, 6000));
}

/** `bareAround`: per round, its bare time (by default the mean of the bare runs on either side). */
function report(
  side: number,
  build: string,
  r: Measured,
  bareAround = r.pipelineSeconds.map((_, k) => (r.bareSeconds[k]! + r.bareSeconds[k + 1]!) / 2),
): void {
  const fixed = (xs: number[], digits: number) => xs.map((x) => x.toFixed(digits)).join(', ');
  // Each round against the mean of the bare runs on either side of it.
  const ratios = r.pipelineSeconds.map((seconds, k) => bareAround[k]! / seconds);
  console.log(
    `\n${build}: ${side} x ${side} synthetic SVS, H&E level ${r.heLevel}, ${values.markers} markers, batch ${values.batch}, ${values.threads} intra-op thread(s), ${values.writers ?? 'default'} writer(s), ${values.kernel ?? 'default'} kernel, ${availableParallelism()} cores`,
  );
  console.log(
    `  positions          ${r.tiles} (${r.inferred} inferences: band edges are inferred twice; ${r.failed} failed)`,
  );
  console.log(
    `  whole path         ${fixed(r.pipelineSeconds, 2)} s, median ${(r.tiles / median(r.pipelineSeconds)).toFixed(1)} tiles/s (read H&E, infer, write level 0)`,
  );
  console.log(
    `  bare session.run   ${fixed(r.bareSeconds, 2)} s, median ${(r.tiles / median(r.bareSeconds)).toFixed(1)} tiles/s (before and after each round)`,
  );
  console.log(
    `  ratio              ${median(ratios).toFixed(2)}, median of ${fixed(ratios, 2)} (target >= 0.85)`,
  );
  // Where cores are few, the ratio is bounded by the CPU the path needs beside the inference:
  // however well the work overlaps, at most `cores` seconds of it a second.
  const perTile = (cpu: number) => ((cpu * 1000) / r.tiles).toFixed(1);
  const pathCpu = median(r.pipelineCpuSeconds);
  console.log(
    `  CPU per tile       ${perTile(pathCpu)} ms whole path, ${perTile(r.bareCpuSeconds)} ms bare (all threads)`,
  );
  const bound = (availableParallelism() * median(bareAround)) / pathCpu;
  console.log(`  ratio bound        ${Math.min(1, bound).toFixed(2)} (cores x bare time / whole-path CPU)`);
  console.log(`  pyramid + metadata ${r.finishSeconds.toFixed(2)} s (postprocessing)`);
  const inference = median(r.pipelineSeconds);
  console.log(
    `  whole job          ${(inference + r.finishSeconds).toFixed(2)} s before (inference path, then postprocessing), ${fixed(r.jobSeconds, 2)} s in bands with the lower levels built as they go${r.afterBandsSeconds.length > 0 ? ` (${fixed(r.afterBandsSeconds, 2)} s of it after the last band)` : ''}`,
  );
  // Each round's job against its own round's path.
  const jobRatios = r.jobSeconds.map((seconds, k) => seconds / r.pipelineSeconds[k]!);
  console.log(
    `  job / path         ${median(jobRatios).toFixed(2)}, median of ${fixed(jobRatios, 2)} (whole job in bands over the inference path, round by round; target <= 1.15)`,
  );
  if (r.jobCpuSeconds.length > 0) {
    const cpuRatios = r.jobCpuSeconds.map((cpu, k) => cpu / r.pipelineCpuSeconds[k]!);
    console.log(
      `  job CPU / path CPU ${median(cpuRatios).toFixed(2)}, median of ${fixed(cpuRatios, 2)} (${fixed(r.jobCpuSeconds, 2)} s, all threads)`,
    );
  }
  console.log(
    `  peak RSS           ${r.pipelinePeakMiB} MiB after the first bare run and whole path, ${r.peakMiB} MiB at the end`,
  );
}

async function main(): Promise<void> {
  const rounds = Number(values.rounds);
  if (!Number.isSafeInteger(rounds) || rounds < 1)
    throw new RangeError(`--rounds ${values.rounds}: 1 or more`);
  if (values.measure) return measure(values.measure);
  for (const side of values.sizes.split(',').map(Number)) await benchSize(side);
  // Once, at the end: deletions tax the files created after them (`outlastDeletions`).
  if (!values.keep) await rm(scratch, { recursive: true, force: true });
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
