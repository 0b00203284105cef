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
 * `--field key=VALUE`: VALUE as JSON where it reads as JSON (`3`, `true`, `null`, `["a","b"]`,
 * `"3"`), else as text: the shell has already taken the quotes off `stage="II"`.
 */
export function fieldValue(clause: string): [key: string, value: unknown] {
  const at = clause.indexOf('=');
  if (at < 1) throw new UsageError(`--field wants key=VALUE, got ${clause}`);
  const text = clause.slice(at + 1);
  try {
    return [clause.slice(0, at), JSON.parse(text)];
  } catch {
    return [clause.slice(0, at), text];
  }
}

/** A whole number of at least `least` (`--parallel`, `--limit`), checked before any request. */
export function wholeNumber(flag: string, text: string, least = 1): number {
  const n = Number(text);
  if (text.trim() === '' || !Number.isInteger(n) || n < least)
    throw new UsageError(`${flag} must be a whole number of at least ${least}, got ${text}`);
  return n;
}
