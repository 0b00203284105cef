import { ActivityFailure, ApplicationFailure, patched, proxyActivities } from '@temporalio/workflow';
import type { Activities } from '../activities';
import type { PyramidRegionPlan } from '../activities/ingest';
import type { SampleStatus } from '../schemas/enums';
import { reasonOf } from './failures';
import { computeActivities } from './proxies';
import { type RegionTask, runRegions } from './regions';

type PyramidRegion = Parameters<Activities['buildHePyramidRegion']>[0]['region'];
type ColumnRange = NonNullable<PyramidRegion['columns']>;

/** Ingest's io steps stream whole uploads (assembly), hence their long timeout and heartbeat. */
const io = proxyActivities<Activities>({
  startToCloseTimeout: '2 hours',
  heartbeatTimeout: '2 minutes',
  retry: { maximumAttempts: 5, initialInterval: '2 seconds' },
});

export interface IngestInput {
  sampleId: string;
}

export interface IngestResult {
  status: SampleStatus;
  statusMessage: string | null;
}

/**
 * Takes a sample from its last uploaded byte to `ready`: assemble the chunks, de-identify
 * (`deid_running`), then probe, build the H&E pyramid and find the tissue (`preprocessing`),
 * then start segmentation when the upload asked for it.
 * A step that fails for good (assembly included) ends the sample in `deid_failed` or
 * `preprocess_failed` with a reason, and the derived objects are removed; the workflow itself completes normally, so an
 * operator sees the outcome in its result.
 */
export async function ingestWorkflow(input: IngestInput): Promise<IngestResult> {
  const { sampleId } = input;
  const compute = computeActivities({ maximumAttempts: 5 });
  let assembled: Awaited<ReturnType<typeof io.assembleUpload>>;
  try {
    assembled = await io.assembleUpload({ sampleId });
  } catch (err) {
    // The sample is `deid_running` since its last byte landed: assembly is the first step of it.
    return fail(sampleId, 'deid_failed', err, 'assembling the upload');
  }
  if (assembled.status === 'upload_failed')
    return { status: 'upload_failed', statusMessage: assembled.reason };
  if (patched('slide-header')) await readSlideHeader(sampleId, compute);
  try {
    await compute.deidentifySlide({ sampleId });
  } catch (err) {
    return fail(sampleId, isRefusedFormat(err) ? 'preprocess_failed' : 'deid_failed', err);
  }
  try {
    await compute.probeSlide({ sampleId });
    if (patched('pyramid-regions')) await buildPyramidByRegions(sampleId);
    else await compute.buildHePyramid({ sampleId });
    await compute.detectTissue({ sampleId });
    await io.finishIngest({ sampleId });
  } catch (err) {
    return fail(sampleId, 'preprocess_failed', err);
  }
  if (patched('auto-segmentation')) await startAutoSegmentation(sampleId);
  return { status: 'ready', statusMessage: null };
}

/**
 * The H&E pyramid in regions (bands of level-0 shard rows, then the levels above them), each
 * an activity any compute worker can take, a bounded number at once; each region starts once
 * the rows it reads are stored. A region that fails for good stops the others before the
 * failure is recorded (which removes what they wrote).
 */
async function buildPyramidByRegions(sampleId: string): Promise<void> {
  const compute = computeActivities({ maximumAttempts: 5, waitForCancellation: true });
  const plan = await compute.planHePyramidRegions({ sampleId });
  if (plan.stages === null) {
    await compute.buildHePyramid({ sampleId });
    return;
  }
  const { widthPx, heightPx } = plan;
  const regions = pyramidRegionTasks(plan.stages);
  await runRegions(regions, plan.regionsInFlight, (index) =>
    compute.buildHePyramidRegion({ sampleId, widthPx, heightPx, region: regions[index]!.region }),
  );
  await compute.finishHePyramid({ sampleId, widthPx, heightPx });
}

/**
 * Every region of every stage, each after the regions of the stage below that it reads: those
 * of the rows and columns under its own (a stage's columns span `2 ** (topLevel - leafLevel)`
 * of the stage below's each).
 */
function pyramidRegionTasks(stages: NonNullable<PyramidRegionPlan['stages']>) {
  const tasks: (RegionTask & { region: PyramidRegion })[] = [];
  let below: { first: number; regions: PyramidRegion[] } | undefined;
  for (const { leafLevel, topLevel, rows, columns } of stages) {
    const first = tasks.length;
    const span = 2 ** (topLevel - leafLevel);
    const regions: PyramidRegion[] = [];
    for (let row = 0; row < rows; row++) {
      for (const range of columns ?? [undefined]) {
        const region = { leafLevel, topLevel, row, ...(range && { columns: range }) };
        const after = (below?.regions ?? []).flatMap((source, k) =>
          reads(region, source, span) ? [below!.first + k] : [],
        );
        tasks.push({ after, region });
        regions.push(region);
      }
    }
    below = { first, regions };
  }
  return tasks;
}

/** Whether `region` reads what `source`, a region of the stage below, writes. */
function reads(region: PyramidRegion, source: PyramidRegion, span: number): boolean {
  const overlaps = (a: ColumnRange | undefined, b: ColumnRange | undefined) =>
    a === undefined || b === undefined || (a.first < b.end && b.first < a.end);
  const under = region.columns && { first: region.columns.first * span, end: region.columns.end * span };
  return Math.floor(source.row / span) === region.row && overlaps(under, source.columns);
}

/**
 * Size and scale from the header as soon as the bytes are whole, for `complete` and for a
 * submission before `ready`. A file whose header cannot be read is refused by de-identification
 * next, with its reason, so a failure here changes nothing.
 */
async function readSlideHeader(sampleId: string, compute: ReturnType<typeof computeActivities>) {
  try {
    await compute.readSlideHeader({ sampleId });
  } catch {
    // De-identification reads the same file and tells what is wrong with it.
  }
}

/**
 * A sample uploaded with `autoSegment` starts segmentation once ready. The sample is ready
 * whatever happens here: a run that could not be queued is one POST away.
 */
async function startAutoSegmentation(sampleId: string): Promise<void> {
  try {
    await io.queueAutoSegmentation({ sampleId });
  } catch {
    // Retried by the proxy already; the sample stays ready without a run.
  }
}

/**
 * A slide format refused by name (MIRAX, VSI, VMS, SVSLIDE) is found when de-identification
 * first reads the file, but nothing failed to be de-identified: the service cannot read the
 * slide at all, which is what `preprocess_failed` says.
 */
function isRefusedFormat(err: unknown): boolean {
  const cause = err instanceof ActivityFailure ? err.cause : err;
  return cause instanceof ApplicationFailure && cause.type === 'UnsupportedFormat';
}

async function fail(
  sampleId: string,
  status: 'deid_failed' | 'preprocess_failed',
  err: unknown,
  step = status === 'deid_failed' ? 'de-identification' : 'preprocessing',
) {
  const statusMessage = reasonOf(
    err,
    `${step} failed on the service's side after several attempts; the operators can re-run it`,
  );
  await io.failIngest({ sampleId, status, message: statusMessage });
  return { status, statusMessage };
}
