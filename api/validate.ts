import type { z } from 'zod';
import { AppError } from './errors';

type Part = 'body' | 'query' | 'params' | 'headers';

/** The query parameter that carries a signed link's token, and the answer when it is bad. */
interface Credential {
  name: string;
  error: AppError;
}

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
function errorFor(error: z.ZodError, part: Part, credential: Credential | undefined): AppError {
  // A malformed id can name nothing: the same answer as an id of another organization.
  if (part === 'params') return new AppError('not_found', 'resource not found');
  if (credential && error.issues.some((issue) => issue.path[0] === credential.name)) return credential.error;
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

/**
 * JSON.parse keeps `__proto__` as an own property; code that copies or merges such an object
 * sets a prototype instead of a key. No property of ours has that name: refuse it at any depth.
 */
function hasPrototypeKey(body: unknown): boolean {
  // A loop, not recursion: a body nested thousands deep must not overflow the stack.
  const pending: unknown[] = [body];
  while (pending.length > 0) {
    const value = pending.pop();
    if (typeof value !== 'object' || value === null) continue;
    if (Object.hasOwn(value, '__proto__')) return true;
    for (const inner of Object.values(value)) pending.push(inner);
  }
  return false;
}

/** A bad `credential` parameter is answered with its own error, not as a malformed query. */
export function parse<S extends z.ZodType>(
  schema: S,
  input: unknown,
  part: Part,
  options: { credential?: Credential } = {},
): z.output<S> {
  if (
    part === 'body' &&
    (input === undefined || (typeof input === 'object' && input !== null && Object.keys(input).length === 0))
  ) {
    throw new AppError('invalid_request', 'request body is empty');
  }
  if (part === 'body' && hasPrototypeKey(input)) {
    throw new AppError('invalid_request', "body has a property named '__proto__'");
  }
  const result = schema.safeParse(input);
  if (!result.success) throw errorFor(result.error, part, options.credential);
  return result.data;
}
