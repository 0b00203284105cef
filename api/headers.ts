import type { RequestHandler } from 'express';

/**
 * Answers of the API hold one organization's data: no cache may keep them (a route with its
 * own policy, such as the public cohort's bytes, sets `Cache-Control` over this), and a browser
 * must not sniff a JSON body or a stored file into something it would run.
 */
export function privateResponses(): RequestHandler {
  return (_req, res, next) => {
    res.setHeader('Cache-Control', 'no-store');
    res.setHeader('X-Content-Type-Options', 'nosniff');
    next();
  };
}
