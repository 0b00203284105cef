import type { StoredFieldValue } from '../../db/sample-fields';
import { isCalendarDay } from '../../schemas/common';
import { type FieldDefinition, RESERVED_PUBLIC_TAG, TagSet } from '../../schemas/samples';
import { AppError } from '../errors';

const invalid = (key: string, why: string) => new AppError('validation_failed', `fields.${key}: ${why}`);

/** Checks one supplied value against its definition and gives the column it is stored in. */
export function toStoredValue(definition: FieldDefinition, value: unknown): StoredFieldValue {
  const { key, valueType, options } = definition;
  switch (valueType) {
    case 'text':
      if (typeof value !== 'string' || value.length > 10_000 || value.includes('\0')) {
        throw invalid(key, 'must be text of at most 10000 characters without NUL');
      }
      return { kind: 'text', value };
    case 'number':
      if (typeof value !== 'number' || !Number.isFinite(value)) throw invalid(key, 'must be a finite number');
      return { kind: 'number', value };
    case 'date':
      if (typeof value !== 'string' || !isCalendarDay(value))
        throw invalid(key, 'must be a date YYYY-MM-DD from 0001 to 9999');
      return { kind: 'date', value };
    case 'boolean':
      if (typeof value !== 'boolean') throw invalid(key, 'must be true or false');
      return { kind: 'boolean', value };
    case 'select':
      if (typeof value !== 'string' || !options.includes(value))
        throw invalid(key, `must be one of ${options.join(', ')}`);
      return { kind: 'text', value };
    case 'multi_select': {
      if (
        !Array.isArray(value) ||
        value.some((item) => typeof item !== 'string' || !options.includes(item))
      ) {
        throw invalid(key, `must be an array of ${options.join(', ')}`);
      }
      return { kind: 'options', value: [...new Set(value as string[])].sort() };
    }
    case 'tags':
      throw new Error('tags are written as a tag set');
  }
}

/** The complete desired tag set; the reserved public tag belongs to the public cohort alone. */
export function toTagSet(value: unknown): string[] {
  const parsed = TagSet.safeParse(value);
  if (!parsed.success) throw invalid('tags', parsed.error.issues.map((issue) => issue.message).join('; '));
  if (parsed.data.includes(RESERVED_PUBLIC_TAG)) {
    throw new AppError(
      'read_only_field',
      `the tag '${RESERVED_PUBLIC_TAG}' is reserved for the public cohort`,
    );
  }
  return parsed.data;
}
