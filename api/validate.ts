import type { z } from 'zod';
import { AppError } from './errors';

type Part = 'body' | 'query' | 'params';

function describe(issue: z.core.$ZodIssue, part: Part): string {
  const where = issue.path.length > 0 ? issue.path.join('.') : part;
  if (issue.code === 'unrecognized_keys') {
    return `${part} has unknown ${part === 'query' ? 'parameter' : 'property'} ${issue.keys.map((k) => `'${k}'`).join(', ')}`;
  }
  return `${where}: ${issue.message}`;
}

/**
 * 400 when the request's shape is wrong (not an object, unknown or retired property, bad query
 * or path), 422 when a known body property holds an invalid value (DECISIONS.md).
 */
function errorFor(error: z.ZodError, part: Part): AppError {
  // A malformed id can name nothing: the same answer as an id of another organization.
  if (part === 'params') return new AppError('not_found', 'resource not found');
  const structural = error.issues.find(
    (issue) =>
      issue.code === 'unrecognized_keys' || (issue.path.length === 0 && issue.code === 'invalid_type'),
  );
  if (structural) return new AppError('invalid_request', describe(structural, part));
  const message = error.issues.map((issue) => describe(issue, part)).join('; ');
  return part === 'body'
    ? new AppError('validation_failed', message)
    : new AppError('invalid_request', message);
}

export function parse<S extends z.ZodType>(schema: S, input: unknown, part: Part): z.output<S> {
  if (
    part === 'body' &&
    (input === undefined || (typeof input === 'object' && input !== null && Object.keys(input).length === 0))
  ) {
    throw new AppError('invalid_request', 'request body is empty');
  }
  const result = schema.safeParse(input);
  if (!result.success) throw errorFor(result.error, part);
  return result.data;
}
