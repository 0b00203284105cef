import type { Activities } from '../activities';
import type { SampleRerunStep } from '../schemas/temporal';
import { computeActivities } from './proxies';

export type RerunActivityInput =
  | { kind: 'job'; id: string; step: 'predict' | 'postprocess' }
  | { kind: 'sample'; id: string; step: SampleRerunStep };

interface RerunResults {
  predict: Awaited<ReturnType<Activities['predictJob']>>;
  postprocess: Awaited<ReturnType<Activities['postprocessJob']>>;
  probe: Awaited<ReturnType<Activities['probeSlide']>>;
  pyramid: Awaited<ReturnType<Activities['buildHePyramid']>>;
  tissue: Awaited<ReturnType<Activities['detectTissue']>>;
}

export type RerunActivityResult = {
  [S in keyof RerunResults]: { step: S; result: RerunResults[S] };
}[keyof RerunResults];

/**
 * An operator's re-run of one step of a job or an ingest
 * (`rerun-{kind}-{id}-{step}-{time}`, `npm run admin -- job|sample rerun`). Every step is
 * idempotent and reads its inputs from the database; a job's steps run in re-run mode, which
 * leaves the job's status and credits alone.
 */
export async function rerunActivityWorkflow(input: RerunActivityInput): Promise<RerunActivityResult> {
  const compute = computeActivities({ maximumAttempts: 3 });
  switch (input.step) {
    case 'predict':
      return { step: input.step, result: await compute.predictJob({ jobId: input.id, rerun: true }) };
    case 'postprocess':
      return {
        step: input.step,
        result: await compute.postprocessJob({ jobId: input.id, rerun: true }),
      };
    case 'probe':
      return { step: input.step, result: await compute.probeSlide({ sampleId: input.id }) };
    case 'pyramid':
      return { step: input.step, result: await compute.buildHePyramid({ sampleId: input.id }) };
    case 'tissue':
      return { step: input.step, result: await compute.detectTissue({ sampleId: input.id }) };
  }
}
