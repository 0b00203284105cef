import { z } from 'zod';

/** The public cohort's read endpoints: a public sample is addressed by its `publicId` only. */
export const PublicSampleParams = z.object({
  publicId: z.uuid().meta({ description: 'The public handle of a public-cohort sample' }),
});

export const PublicZarrParams = z.object({
  publicId: z.uuid().meta({ description: 'The public handle of a public-cohort sample' }),
  path: z.string().meta({ description: 'Path inside the public store; slashes are not encoded' }),
});
