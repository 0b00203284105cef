import { z } from 'zod';

/** The public cohort's read endpoints: a public sample is addressed by its `publicId` only. */
export const PublicSampleParams = z.object({ publicId: z.uuid() });

export const PublicZarrParams = z.object({
  publicId: z.uuid(),
  path: z.string().meta({ description: 'Path inside the public store; slashes are not encoded' }),
});
