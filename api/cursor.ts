import { createHmac, timingSafeEqual } from 'node:crypto';
import type { PagePosition } from '../db/samples';
import { AppError } from './errors';

/**
 * Opaque, tamper-evident page cursors: the position of the last row, HMAC-signed. A cursor
 * is not bound to a page size, and a forged or damaged one is a 400.
 */
export function createCursorCodec(secret: string, purpose: string) {
  const mac = (payload: string) => createHmac('sha256', secret).update(`${purpose}\n${payload}`).digest();

  function encode(position: PagePosition): string {
    const payload = Buffer.from(JSON.stringify([position.createdAt, position.id])).toString('base64url');
    return `${payload}.${mac(payload).toString('base64url')}`;
  }

  function decode(cursor: string): PagePosition {
    const invalid = new AppError('invalid_request', 'cursor is malformed or was not issued by this service');
    const [payload, signature] = cursor.split('.');
    if (!payload || !signature) throw invalid;
    const expected = mac(payload);
    const given = Buffer.from(signature, 'base64url');
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) throw invalid;
    const [createdAt, id] = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as [
      string,
      string,
    ];
    return { createdAt, id };
  }

  return { encode, decode };
}
