import { z } from 'zod';

export const Uuid = z.uuid();
export const DateTime = z.iso.datetime({ offset: true });

/** 64-bit byte counts travel as strings. */
export const ByteCount = z
  .string()
  .regex(/^\d+$/)
  .meta({ description: 'Bytes, a string-encoded 64-bit integer' });

/** Accepts an integer or a digit string; yields a safe integer number of bytes. */
export const ByteCountInput = z
  .union([z.number().int().nonnegative(), z.string().regex(/^\d{1,16}$/, 'must be a string of digits')])
  .transform((value) => Number(value))
  .pipe(z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER));

/** A number as a person types it (a form field, a flag): a decimal comma is read as the point it means. */
export function typedNumber(text: string): number {
  return Number(text.trim().replace(',', '.'));
}

/** Microns per pixel: a number, or an isotropic `{x, y}`; each in (0, 100]. */
const mppValue = z.number().gt(0).lte(100);
export const MppInput = z
  .union(
    [
      mppValue,
      // `x-equalProperties` states the refinement below in the OpenAPI document.
      z
        .strictObject({ x: mppValue, y: mppValue })
        .meta({ 'x-equalProperties': ['x', 'y'], description: 'Isotropic only: x must equal y' }),
    ],
    {
      // Neither shape: say both, not the union's bare "Invalid input".
      error: (issue) =>
        issue.code === 'invalid_union'
          ? 'must be microns per pixel as a number, or as {"x": N, "y": N} with x equal to y'
          : undefined,
    },
  )
  .refine((value) => typeof value === 'number' || value.x === value.y, {
    message: 'anisotropic mpp is not supported: x and y must be equal',
  })
  .transform((value) => (typeof value === 'number' ? value : value.x))
  .meta({
    description:
      'Microns per pixel in (0, 100]: a number, or `{x, y}` with x equal to y (anisotropic is 422 `validation_failed`)',
  });

/** Display name: trimmed, at most 200 characters, no NUL; null or empty reverts to the filename. */
export const DisplayNameInput = z
  .string()
  .refine((value) => !value.includes('\0'), 'must not contain a NUL character')
  .transform((value) => value.trim())
  .pipe(z.string().max(200))
  .nullable()
  .transform((value) => (value === '' ? null : value));

/**
 * A real calendar day `YYYY-MM-DD` from 0001 to 9999: the regex alone lets `2026-02-30`
 * through, which PostgreSQL's `::date` then refuses.
 */
export function isCalendarDay(day: string): boolean {
  if (!/^\d{4}-\d{2}-\d{2}$/.test(day) || Number(day.slice(0, 4)) < 1) return false;
  const date = new Date(`${day}T00:00:00Z`);
  return !Number.isNaN(date.getTime()) && date.toISOString().slice(0, 10) === day;
}

/** NUL, which PostgreSQL text cannot hold, and the other C0/C1 controls that no filter needs. */
export function hasControlCharacter(text: string): boolean {
  return /\p{Cc}/u.test(text);
}

/** For endpoints that take no query parameters: any parameter is unknown, hence 400. */
export const EmptyQuery = z.strictObject({});

export const PageLimit = (max: number, fallback: number) =>
  z.coerce.number().int().min(1).max(max).default(fallback);
export const Cursor = z.string().min(1).max(512);
