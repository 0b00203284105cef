import { z } from 'zod';
import { Uuid } from './common';
import { JobStatus } from './enums';

/**
 * DECISIONS.md, Numbers: heartbeat every 15 s, SSE `retry` 5000 ms. At most 50 open streams
 * per credential and API process (docs/api.md). All configurable.
 */
export const JOB_STREAM_DEFAULTS = { heartbeatMs: 15_000, retryMs: 5_000, maxPerCredential: 50 } as const;

export const JobStreamParams = z.strictObject({ id: Uuid.meta({ description: 'The job id' }) });

/**
 * The `data` of an `event: message` frame (DECISIONS.md, Stream frames): `message` is the SSE
 * default type, the one browsers' `onmessage` and Strand's clients read.
 */
export const JobStreamStatusData = z
  .strictObject({
    id: Uuid.meta({ description: 'The job' }),
    status: JobStatus,
    progress: z.number().min(0).max(1).nullable(),
    resultStoragePath: z.string().nullable(),
    resultGcsPath: z
      .string()
      .nullable()
      .meta({ description: "`resultStoragePath` under the name Strand's clients read" }),
  })
  .meta({ id: 'JobStreamStatusData' });
export type JobStreamStatusData = z.infer<typeof JobStreamStatusData>;

/** Event ids are the job's event sequence numbers (PostgreSQL integer, from 1). */
export const LastEventId = z
  .string()
  .regex(/^\d{1,10}$/, 'must be the id of an event of this stream')
  .transform(Number)
  .pipe(
    z
      .number()
      .int()
      .max(2 ** 31 - 1, 'must be the id of an event of this stream'),
  );

const LAST_EVENT_ID_PATTERN = `^(${[
  '[0-9]{0,9}',
  '[01][0-9]{9}',
  '20[0-9]{8}',
  '21[0-3][0-9]{7}',
  '214[0-6][0-9]{6}',
  '2147[0-3][0-9]{5}',
  '21474[0-7][0-9]{4}',
  '214748[0-2][0-9]{3}',
  '2147483[0-5][0-9]{2}',
  '21474836[0-3][0-9]',
  '214748364[0-7]',
].join('|')})$`;

export const JobStreamHeaders = z.object({
  'last-event-id': z
    .string()
    .optional()
    .transform((value) => (value === undefined || value.trim() === '' ? undefined : value.trim()))
    .pipe(LastEventId.optional())
    .meta({
      // Digits up to 2^31 - 1 (PostgreSQL integer), or nothing: what LastEventId accepts.
      pattern: LAST_EVENT_ID_PATTERN,
      description:
        'Resume: the id of the last event received (sent by EventSource on reconnection). Every later event is sent; without it, every event of the job',
    }),
});

export type JobStreamFrame =
  | { event: 'message'; id: number; data: JobStreamStatusData }
  | { event: 'heartbeat'; id: number }
  | { event: 'end'; id: number };
