import { z } from 'zod';
import {
  ByteCount,
  Cursor,
  DateTime,
  DisplayNameInput,
  hasControlCharacter,
  isCalendarDay,
  MppInput,
  PageLimit,
  Uuid,
} from './common';
import { ExpirationSource, JobStatus, SampleStatus } from './enums';
import { SegmentationState } from './segmentation';

export const TAG_RULES = { maxRawItems: 1000, maxDistinct: 50, maxLength: 50 } as const;
/** A tag that only the public cohort may carry; writing it is 403 like `fields.public`. */
export const RESERVED_PUBLIC_TAG = 'public';

export const SampleJob = z
  .strictObject({
    id: Uuid,
    status: JobStatus,
    progress: z.number().nullable(),
    reservedCredits: z.number().int().nullable(),
    markers: z.array(z.string()),
    createdAt: DateTime.nullable(),
    startedAt: DateTime.nullable(),
    completedAt: DateTime.nullable(),
    errorMessage: z.string().nullable(),
    resultsAvailable: z.boolean(),
  })
  .meta({ id: 'SampleJob' });
export type SampleJob = z.infer<typeof SampleJob>;

export const FieldValues = z.record(z.string(), z.unknown()).meta({
  description: 'Field values keyed by definition key; `tags` is a sorted string array, `public` a boolean',
});

export const SampleDetail = z
  .strictObject({
    ownership: z.literal('mine'),
    id: Uuid,
    appUrl: z.string(),
    name: z.string().nullable(),
    filename: z.string(),
    status: SampleStatus,
    fileSize: ByteCount,
    widthPx: z.number().int().nullable(),
    heightPx: z.number().int().nullable(),
    mpp: z.number().nullable(),
    fields: FieldValues,
    tags: z.array(z.string()),
    createdAt: DateTime.nullable(),
    expiresAt: DateTime.nullable(),
    expiresAtSource: ExpirationSource.nullable(),
    expiresInDays: z.number().int().min(0).nullable(),
    willExpire: z.boolean(),
    trashedAt: DateTime.nullable(),
    jobs: z.array(SampleJob).max(50),
    jobCount: z.number().int().min(0),
    segmentation: SegmentationState,
  })
  .meta({ id: 'SampleDetail' });
export type SampleDetail = z.infer<typeof SampleDetail>;

export const SampleIdParams = z.strictObject({
  id: Uuid.meta({ description: 'The sample id (the id of its upload)' }),
});

/** Tag set rules: trim, lowercase, 1..50 characters, no comma or NUL, dedupe, at most 50. */
export const TagSet = z
  .array(z.string())
  .max(TAG_RULES.maxRawItems)
  .transform((raw) => [...new Set(raw.map((tag) => tag.trim().toLowerCase()))].sort())
  .pipe(
    z
      .array(
        z
          .string()
          .min(1, 'a tag must have 1 to 50 characters')
          .max(TAG_RULES.maxLength, 'a tag must have 1 to 50 characters')
          .refine((tag) => !tag.includes(','), 'a tag must not contain a comma')
          .refine((tag) => !tag.includes('\0'), 'a tag must not contain NUL'),
      )
      .max(TAG_RULES.maxDistinct, `at most ${TAG_RULES.maxDistinct} distinct tags`),
  );

export const PatchSampleRequest = z
  .strictObject({
    name: DisplayNameInput.optional().meta({
      description: 'Display name: trimmed, at most 200 characters; null or empty reverts to the filename',
    }),
    fields: z.record(z.string(), z.unknown()).optional().meta({
      description:
        'Field values by definition key (GET /sample-fields); each replaces the whole field, null clears it. `tags`: 1 to 50 characters each, no comma, at most 50',
    }),
    mpp: MppInput.optional(),
  })
  .meta({ id: 'PatchSampleRequest', minProperties: 1 });
export type PatchSampleRequest = z.infer<typeof PatchSampleRequest>;

export const SampleListItem = z
  .strictObject({
    ownership: z.enum(['mine', 'public']),
    id: z.string(),
    name: z.string().nullable(),
    filename: z.string(),
    status: SampleStatus,
    fileSize: ByteCount,
    fields: FieldValues,
    createdAt: DateTime,
    appUrl: z.string(),
  })
  .meta({ id: 'SampleListItem' });
export type SampleListItem = z.infer<typeof SampleListItem>;

export const SampleListPage = z
  .strictObject({ items: z.array(SampleListItem), nextCursor: z.string().nullable(), appUrl: z.string() })
  .meta({ id: 'SampleListPage' });
export type SampleListPage = z.infer<typeof SampleListPage>;

export const TrashItem = SampleListItem.extend({ trashedAt: DateTime, purgeAt: DateTime }).meta({
  id: 'TrashItem',
});
export const TrashPage = z
  .strictObject({ items: z.array(TrashItem), nextCursor: z.string().nullable() })
  .meta({ id: 'TrashPage' });

export const TrashQuery = z.strictObject({
  limit: PageLimit(100, 48).meta({ description: 'Page size, 1 to 100 (default 48)' }),
  cursor: Cursor.optional().meta({ description: 'The `nextCursor` of the previous page' }),
});

/**
 * A parameter given once or repeated. A bad value's message is its item's ("expected one of
 * …"), not the union's bare "Invalid input" that says neither shape matched.
 */
const oneOrMany = <T extends z.ZodType>(item: T) =>
  z
    .union([item, z.array(item)], {
      error: (issue) =>
        issue.code === 'invalid_union'
          ? issue.errors[Array.isArray(issue.input) ? 1 : 0]?.[0]?.message
          : undefined,
    })
    .transform((value) => (Array.isArray(value) ? value : [value]) as z.output<T>[]);

const utcDay = z
  .string()
  .regex(/^\d{4}-\d{2}-\d{2}$/, 'must be a UTC day YYYY-MM-DD')
  .refine(isCalendarDay, 'must be a real calendar day from 0001 to 9999');

export const listStatuses = [
  'ready',
  'preprocessing',
  'uploading',
  'upload_failed',
  'preprocess_failed',
] as const;
export const workflowFacets = ['ready_no_job', 'in_flight', 'has_results'] as const;

export const SampleListQuery = z
  .strictObject({
    scope: z.enum(['mine', 'public', 'all']).default('mine').meta({
      description:
        '`mine`: the organization’s samples; `public`: the public cohort (only `q` applies); `all`: both, owned first',
    }),
    q: z
      .string()
      .min(1)
      .max(200)
      .refine((q) => !hasControlCharacter(q), 'must not contain control characters')
      .optional()
      .meta({ description: 'Text in the name or filename (case-insensitive; `%` and `_` are literal)' }),
    limit: PageLimit(100, 48).meta({ description: 'Page size, 1 to 100 (default 48)' }),
    cursor: Cursor.optional().meta({ description: 'The `nextCursor` of the previous page' }),
    uploaded_from: utcDay.optional().meta({ description: 'Uploaded on or after this UTC day (YYYY-MM-DD)' }),
    uploaded_to: utcDay.optional().meta({ description: 'Uploaded on or before this UTC day (YYYY-MM-DD)' }),
    status: oneOrMany(z.enum(listStatuses))
      .pipe(z.array(z.enum(listStatuses)).max(5))
      .optional()
      .meta({ description: 'Sample status; repeat the parameter for any of several' }),
    workflow: oneOrMany(z.enum(workflowFacets))
      .pipe(z.array(z.enum(workflowFacets)).max(3))
      .optional()
      .meta({
        description:
          '`ready_no_job`: ready, never predicted; `in_flight`: a job is active; `has_results`: a job has results. Repeatable',
      }),
    marker: oneOrMany(
      z
        .string()
        .regex(/^[^:,]{1,100}:(requested|completed)$/, 'must be NAME:requested or NAME:completed')
        .refine((clause) => !hasControlCharacter(clause), 'must not contain control characters'),
    )
      .pipe(z.array(z.string()).max(20))
      .optional()
      .meta({
        description:
          '`NAME:requested` or `NAME:completed`: a job asked for, or made, this marker. Repeatable',
      }),
    field: oneOrMany(z.string().min(1)).pipe(z.array(z.string()).max(20)).optional().meta({
      description:
        '`DEFINITION_ID:operator[:VALUE]` with an operator of the field’s type (`eq`, `contains`, `gte`, `lte`, `is_empty`, `is_not_empty`). Repeatable',
    }),
  })
  .refine((query) => !query.uploaded_from || !query.uploaded_to || query.uploaded_from <= query.uploaded_to, {
    message: 'uploaded_from must not be later than uploaded_to',
    path: ['uploaded_from'],
  })
  .refine((query) => query.scope !== 'public' || Object.keys(facetsOf(query)).every((name) => name === 'q'), {
    message: 'scope=public supports only the q facet',
    path: ['scope'],
  });
export type SampleListQuery = z.infer<typeof SampleListQuery>;

/** The facet parameters of a list query (everything but scope, paging). */
export function facetsOf(query: Partial<Record<string, unknown>>): Record<string, unknown> {
  const { scope: _scope, limit: _limit, cursor: _cursor, ...facets } = query;
  return Object.fromEntries(Object.entries(facets).filter(([, value]) => value !== undefined));
}

const expirationFields = {
  expiresAt: DateTime.optional().meta({ description: 'Expire at this instant (ISO 8601 with offset)' }),
  neverExpire: z.literal(true).optional().meta({ description: 'Pin: never expire' }),
  useOrgDefault: z
    .literal(true)
    .optional()
    .meta({ description: 'Return to the organization’s default retention' }),
  reason: z
    .string()
    .max(1000)
    // PostgreSQL text cannot hold NUL; the message names the property. A refinement, not a
    // documented `pattern`: NUL is refused in every text property (api/errors.ts).
    .refine((text) => !text.includes('\u0000'), 'must not contain NUL')
    .optional()
    .meta({ description: 'Why, kept in the audit log' }),
};
/** A body that holds exactly one of `keys`: the refinement, and the same rule as OpenAPI states it. */
function exactlyOneOf<K extends string>(keys: readonly K[]) {
  const check = (body: Partial<Record<K, unknown>>) =>
    keys.filter((key) => body[key] !== undefined).length === 1;
  return {
    refinement: [check, { message: `exactly one of ${keys.join(', ')} is required` }] as const,
    schema: { oneOf: keys.map((key) => ({ required: [key] })) },
  };
}
const exactlyOneExpiration = exactlyOneOf(['expiresAt', 'neverExpire', 'useOrgDefault']);

/**
 * `expiresAt` for an expiration chosen as a day (the web app's date control, `sps samples
 * expire --at DAY`): the end of that day in UTC, so the sample stays through it.
 */
export const endOfDay = (day: string) => `${day}T23:59:59.000Z`;

export const ExpirationChange = z
  .strictObject(expirationFields)
  .refine(...exactlyOneExpiration.refinement)
  .meta({ id: 'ExpirationChange', ...exactlyOneExpiration.schema });
export type ExpirationChange = z.infer<typeof ExpirationChange>;

const bulkSampleIds = z
  .array(Uuid)
  .min(1)
  .max(500)
  .meta({ description: 'The samples, 1 to 500; all or nothing' });

export const BulkExpirationChange = z
  .strictObject({
    sampleIds: bulkSampleIds,
    ...expirationFields,
  })
  .refine(...exactlyOneExpiration.refinement)
  .meta({ id: 'BulkExpirationChange', ...exactlyOneExpiration.schema });
export type BulkExpirationChange = z.infer<typeof BulkExpirationChange>;

/**
 * The expiration bodies under their older names (`PATCH /samples/{id}/retention`, `PATCH
 * /samples/retention`, which Strand's clients call): `pin: true` is `neverExpire: true`.
 */
const retentionFields = {
  expiresAt: expirationFields.expiresAt,
  pin: z.literal(true).optional().meta({ description: 'Never expire (`neverExpire: true`)' }),
  useOrgDefault: expirationFields.useOrgDefault,
  reason: expirationFields.reason,
};
const exactlyOneRetention = exactlyOneOf(['expiresAt', 'pin', 'useOrgDefault']);

export const RetentionChange = z
  .strictObject(retentionFields)
  .refine(...exactlyOneRetention.refinement)
  .meta({ id: 'RetentionChange', ...exactlyOneRetention.schema });
export const BulkRetentionChange = z
  .strictObject({ sampleIds: bulkSampleIds, ...retentionFields })
  .refine(...exactlyOneRetention.refinement)
  .meta({ id: 'BulkRetentionChange', ...exactlyOneRetention.schema });

/** A retention body as the expiration change it names. */
export function expirationOfRetention<T extends { pin?: true }>({
  pin,
  ...rest
}: T): Omit<T, 'pin'> & { neverExpire?: true } {
  return pin ? { ...rest, neverExpire: true } : rest;
}

export const ExpirationResult = z
  .strictObject({
    id: Uuid,
    expiresAt: DateTime.nullable(),
    expiresAtSource: ExpirationSource.nullable(),
    expirationChangedAt: DateTime,
    expirationChangedBy: z.string(),
    batchId: Uuid,
  })
  .meta({ id: 'ExpirationResult' });
export const BulkExpirationResult = z
  .strictObject({ updated: z.number().int(), batchId: Uuid })
  .meta({ id: 'BulkExpirationResult' });
export const RestoreResult = z
  .strictObject({ id: Uuid, trashedAt: z.null(), expiresAt: DateTime.nullable() })
  .meta({ id: 'RestoreResult' });

export const fieldValueTypes = [
  'text',
  'number',
  'date',
  'boolean',
  'select',
  'multi_select',
  'tags',
] as const;
export const FieldDefinition = z
  .strictObject({
    id: Uuid,
    key: z.string(),
    label: z.string(),
    valueType: z.enum(fieldValueTypes),
    origin: z.enum(['system', 'organization']),
    storage: z.enum(['value_table', 'tag_table', 'column']),
    writable: z.boolean(),
    options: z.array(z.string()),
  })
  .meta({ id: 'SampleFieldDefinition' });
export type FieldDefinition = z.infer<typeof FieldDefinition>;
export const FieldDefinitionList = z
  .strictObject({ count: z.number().int(), fields: z.array(FieldDefinition) })
  .meta({ id: 'SampleFieldDefinitionList' });

export const MarkerList = z
  .strictObject({
    fullPanel: z.boolean(),
    count: z.number().int(),
    markers: z.array(z.strictObject({ name: z.string(), publicPanel: z.boolean() })),
  })
  .meta({ id: 'MarkerList' });

/** `DEFINITION_UUID:op[:VALUE]` */
export const fieldOperators = ['eq', 'contains', 'gte', 'lte', 'is_empty', 'is_not_empty'] as const;
export type FieldOperator = (typeof fieldOperators)[number];
export const operatorsByType: Record<(typeof fieldValueTypes)[number], readonly FieldOperator[]> = {
  text: ['eq', 'contains', 'is_empty', 'is_not_empty'],
  number: ['eq', 'gte', 'lte', 'is_empty', 'is_not_empty'],
  date: ['eq', 'gte', 'lte', 'is_empty', 'is_not_empty'],
  boolean: ['eq', 'is_empty', 'is_not_empty'],
  select: ['eq', 'is_empty', 'is_not_empty'],
  multi_select: ['contains', 'is_empty', 'is_not_empty'],
  tags: ['contains', 'is_empty', 'is_not_empty'],
};
