import { ServiceError } from '@temporalio/client';
import type { Request, Response } from 'express';
import pino from 'pino';
import { z } from 'zod';
import { createCursorCodec } from '../../../api/cursor';
import { AppError, errorHandler } from '../../../api/errors';
import { parse } from '../../../api/validate';
import { isCalendarDay } from '../../../schemas/common';
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

/** What the one error middleware answers for `err`. */
function render(err: unknown) {
  const answer = { status: 0, headers: {} as Record<string, string>, body: undefined as unknown };
  const res = {
    headersSent: false,
    locals: {},
    setHeader(name: string, value: string) {
      answer.headers[name.toLowerCase()] = value;
    },
    status(code: number) {
      answer.status = code;
      return res;
    },
    json(body: unknown) {
      answer.body = body;
      return res;
    },
  };
  errorHandler(pino({ level: 'silent' }))(
    err,
    { path: '/x' } as Request,
    res as unknown as Response,
    () => {},
  );
  return answer;
}

/** The shape @temporalio/client gives a failed call: a ServiceError around a gRPC error. */
function engineError(code: number): Error {
  const grpc = Object.assign(new Error(`${code} grpc failure`), { code, details: 'failure', metadata: {} });
  return new ServiceError('Failed to start Workflow', { cause: grpc });
}

describe('outages', () => {
  test.each([
    [
      'a refused database connection',
      Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }),
    ],
    ['a dropped database connection', Object.assign(new Error('closed'), { code: 'CONNECTION_CLOSED' })],
    ['a connection-class SQLSTATE', Object.assign(new Error('admin shutdown'), { code: '08006' })],
    ['an unreachable workflow engine (UNAVAILABLE)', engineError(14)],
    ['a workflow engine past its deadline', engineError(4)],
  ])('%s is 503 unavailable with Retry-After', (_name, err) => {
    const answer = render(err);
    expect(answer.status).toBe(503);
    expect(answer.body).toEqual({
      error: 'unavailable',
      message: expect.any(String),
      required: null,
      retryAfterSeconds: 5,
    });
    expect(answer.headers['retry-after']).toBe('5');
  });

  test('other database and engine failures stay 500 internal, without leaking the cause', () => {
    for (const err of [Object.assign(new Error('relation missing'), { code: '42P01' }), engineError(5)]) {
      const answer = render(err);
      expect(answer.status).toBe(500);
      expect(answer.body).toMatchObject({ error: 'internal', message: 'internal error' });
    }
  });

  test('a code a service chose for an outage is kept', () => {
    const chosen = new AppError('recount_enqueue_failed', 'saved, not queued', { cause: engineError(14) });
    expect(render(chosen)).toMatchObject({ status: 500, body: { error: 'recount_enqueue_failed' } });
  });
});

describe('isCalendarDay', () => {
  test('real days from 0001 to 9999 only', () => {
    for (const day of ['2026-01-31', '2024-02-29', '0001-01-01', '9999-12-31'])
      expect(isCalendarDay(day)).toBe(true);
    for (const day of [
      '2026-02-30',
      '2025-02-29',
      '2026-13-01',
      '0000-01-01',
      '2026-1-01',
      '2026-01-01T00',
    ]) {
      expect(`${day} ${isCalendarDay(day)}`).toBe(`${day} false`);
    }
  });
});
