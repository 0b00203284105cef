import type { SpsError } from '../../sdk';

/**
 * What `sps` exits with; scripts may rely on these (docs/cli.md lists them). A refusal by the
 * service is grouped by what the caller can do about it.
 */
export const exitCodes = {
  ok: 0,
  /** Anything unexpected: a bug, an answer the schemas reject, an internal error. */
  failure: 1,
  /** Bad command line, not logged in, or a confirmation a script did not give (`--yes`). */
  usage: 2,
  /** The service rejected the request as invalid (400, 422). */
  invalid: 3,
  /** Credential missing or refused, or not allowed (401, 403). */
  denied: 4,
  /** No such sample, job, export or layer in this organization (404). */
  notFound: 5,
  /** Not possible in the current state: not ready, no results yet, active, being deleted (409). */
  conflict: 6,
  /** Not enough credits (402). */
  insufficientCredits: 7,
  /**
   * The service could not be reached or stayed busy: the network, a gateway that could not reach
   * it (502, 504), or 429 or 503 after the retries.
   */
  unavailable: 8,
  /** A waited-for job, export or segmentation ended failed or cancelled. */
  workFailed: 9,
  /** The user answered no to a confirmation. */
  declined: 10,
  /** Interrupted (Ctrl-C); nothing is left half-written. */
  interrupted: 130,
} as const;

export function exitCodeOf(error: SpsError): number {
  if (error.code === 'network' || error.code === 'unavailable') return exitCodes.unavailable;
  switch (error.status) {
    case 400:
    case 413:
    case 422:
      return exitCodes.invalid;
    case 401:
    case 403:
      return exitCodes.denied;
    case 402:
      return exitCodes.insufficientCredits;
    case 404:
      return exitCodes.notFound;
    case 409:
      return exitCodes.conflict;
    case 429:
    case 503:
      return exitCodes.unavailable;
    default:
      return exitCodes.failure;
  }
}
