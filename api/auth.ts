import type { RequestHandler } from 'express';
import type { Sql } from '../db';
import { type ApiKeyPrincipal, findPrincipalByKeyHash, touchApiKey } from '../db/api-keys';
import { hashApiKey, looksLikeApiKey } from './credentials';
import { AppError } from './errors';

export type Principal = ApiKeyPrincipal & { kind: 'api_key' };

declare module 'express-serve-static-core' {
  interface Locals {
    principal?: Principal;
    requestId?: string;
  }
}

const unauthorized = (message: string) => new AppError('unauthorized', message);

/** Resolves `Authorization: Bearer <API key>` to the caller and its organization. */
export function authenticate(sql: Sql): RequestHandler {
  return async (req, res, next) => {
    const header = req.get('authorization');
    const match = header ? /^Bearer\s+(\S+)$/i.exec(header) : null;
    if (!match) return next(unauthorized('missing bearer credential'));
    const token = match[1]!;
    if (!looksLikeApiKey(token)) return next(unauthorized('invalid credential'));
    const principal = await findPrincipalByKeyHash(sql, hashApiKey(token));
    if (!principal) return next(unauthorized('invalid or revoked credential'));
    res.locals.principal = { ...principal, kind: 'api_key' };
    void touchApiKey(sql, principal.keyId).catch(() => {});
    next();
  };
}

export function principalOf(locals: { principal?: Principal }): Principal {
  if (!locals.principal) throw unauthorized('missing bearer credential');
  return locals.principal;
}
