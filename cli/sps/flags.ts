import { MppInput, typedNumber } from '../../schemas/common';
import { UsageError } from './config';

/** `--mpp`: microns per pixel by the contract's rule, typed as on the web (a decimal comma too). */
export function micronsPerPixel(text: string): number {
  const parsed = MppInput.safeParse(typedNumber(text));
  if (parsed.success && typeof parsed.data === 'number') return parsed.data;
  throw new UsageError(
    `--mpp must be a number of microns per pixel greater than 0 and at most 100 (such as 0.25), got ${text}`,
  );
}

/**
 * A field's VALUE as JSON where it reads as JSON (`3`, `true`, `null`, `["a","b"]`, `"3"`),
 * else as text: the shell has already taken the quotes off `stage="II"`.
 */
function jsonOrText(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/** `samples edit --field key=VALUE`. */
export function fieldValue(clause: string): [key: string, value: unknown] {
  const at = clause.indexOf('=');
  if (at < 1) throw new UsageError(`--field wants key=VALUE, got ${clause}`);
  return [clause.slice(0, at), jsonOrText(clause.slice(at + 1))];
}

/**
 * `samples ls --field KEY:op[:VALUE]` as the list's field facet, which names the definition by
 * its id and wants a JSON value: the field by its key (or id), VALUE read as `fieldValue` reads it.
 */
export function fieldClause(clause: string, definitions: readonly { id: string; key: string }[]): string {
  const [name = '', op = '', ...rest] = clause.split(':');
  if (name === '' || op === '') throw new UsageError(`--field wants KEY:op[:VALUE], got ${clause}`);
  const definition = definitions.find((field) => field.key === name || field.id === name);
  if (!definition) {
    const keys = definitions.map((field) => field.key).join(', ');
    throw new UsageError(`--field: no field '${name}' here; the fields are ${keys} (sps samples fields)`);
  }
  if (rest.length === 0) return `${definition.id}:${op}`;
  return `${definition.id}:${op}:${JSON.stringify(jsonOrText(rest.join(':')))}`;
}

/** A whole number of at least `least` (`--parallel`, `--limit`), checked before any request. */
export function wholeNumber(flag: string, text: string, least = 1): number {
  const n = Number(text);
  if (text.trim() === '' || !Number.isInteger(n) || n < least)
    throw new UsageError(`${flag} must be a whole number of at least ${least}, got ${text}`);
  return n;
}
