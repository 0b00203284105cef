import { z } from 'zod';
import { createCursorCodec } from '../../../api/cursor';
import { AppError } from '../../../api/errors';
import { parse } from '../../../api/validate';
import { errorStatus } from '../../../schemas/errors';

describe('AppError', () => {
  test('every code of DECISIONS.md has one status; body and status agree', () => {
    for (const [code, status] of Object.entries(errorStatus)) {
      const error = new AppError(code as keyof typeof errorStatus, 'm');
      expect(error.status).toBe(status);
      expect(error.toBody()).toEqual({ error: code, message: 'm', required: null, retryAfterSeconds: null });
    }
  });
  test('extra fields never override the protected ones', () => {
    const error = new AppError('insufficient_credits', 'need more', {
      required: 40,
      details: { error: 'x', extra: 1 },
    });
    expect(error.toBody()).toEqual({
      error: 'insufficient_credits',
      message: 'need more',
      required: 40,
      retryAfterSeconds: null,
      extra: 1,
    });
  });
});

describe('parse', () => {
  const schema = z.strictObject({ name: z.string().max(3), size: z.number() });
  const codeOf = (input: unknown, part: 'body' | 'query' | 'params' = 'body') => {
    try {
      parse(schema, input, part);
      return 'ok';
    } catch (err) {
      return (err as AppError).code;
    }
  };
  test('shape problems are invalid_request, value problems validation_failed', () => {
    expect(codeOf({ name: 'abc', size: 1 })).toBe('ok');
    expect(codeOf(undefined)).toBe('invalid_request');
    expect(codeOf({})).toBe('invalid_request');
    expect(codeOf([1, 2])).toBe('invalid_request');
    expect(codeOf({ name: 'abc', size: 1, extra: true })).toBe('invalid_request');
    expect(codeOf({ name: 'abcd', size: 1 })).toBe('validation_failed');
    expect(codeOf({ name: 'abc', size: 'big' })).toBe('validation_failed');
    expect(codeOf({ name: 'abc' })).toBe('validation_failed');
    expect(codeOf({ name: 'abcd', size: 1 }, 'query')).toBe('invalid_request');
    expect(codeOf({ name: 'abcd' }, 'params')).toBe('not_found');
  });
});

describe('cursor', () => {
  const codec = createCursorCodec('secret-secret-secret-secret-secret', 'uploads');
  const position = { createdAt: '2026-11-22T07:00:00.123456Z', id: '6f1c3b8e-2d7a-4f7e-9a55-0b6f9a3f1e2d' };
  test('round-trips an exact position', () => {
    expect(codec.decode(codec.encode(position))).toEqual(position);
  });
  test('a forged or foreign cursor is invalid_request', () => {
    const cursor = codec.encode(position);
    const forgedPayload = Buffer.from(JSON.stringify(['2030-01-01T00:00:00Z', position.id])).toString(
      'base64url',
    );
    expect(() => codec.decode(`${forgedPayload}.${cursor.split('.')[1]}`)).toThrow(AppError);
    expect(() => codec.decode('garbage')).toThrow(AppError);
    const other = createCursorCodec('secret-secret-secret-secret-secret', 'samples');
    expect(() => other.decode(cursor)).toThrow(AppError);
  });
});
