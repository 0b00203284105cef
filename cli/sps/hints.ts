import type { ErrorCode } from '../../schemas/errors';
import type { ClientErrorCode } from '../../sdk';

/** The refused command: its name and its arguments, as typed. */
export interface RefusedCommand {
  name?: string;
  args: readonly string[];
}

/**
 * What to run next after a refusal that `sps` itself can mend, printed under the service's
 * message (which names the HTTP call, for every client). `login` is where a key is checked, so
 * its refusal says what to check rather than to log in.
 */
const NEXT_STEPS: Partial<Record<ErrorCode | ClientErrorCode, (command: RefusedCommand) => string>> = {
  unauthorized: () => 'check the API key: `sps login` saves one, SPS_API_KEY overrides it',
  network: () =>
    'no answer from the service: check that it runs at the URL above (--base-url, SPS_BASE_URL or `sps login` set it); an interrupted upload or download continues when run again',
  // Only `predict` and `segment` meet it, and both take the sample first.
  mpp_required: ({ args: [sample = 'SAMPLE'] }) =>
    `set the slide's scale with \`sps samples edit ${sample} --mpp MICRONS_PER_PIXEL\`, then run this again`,
};
const LOGIN_NEXT_STEPS: Partial<Record<ErrorCode | ClientErrorCode, (command: RefusedCommand) => string>> = {
  unauthorized: () =>
    'the service refused this key: paste it whole (sps_ and 43 characters); a revoked key stays refused, so ask an operator for a new one',
};

export function nextStepAfter(code: string, command: RefusedCommand): string | undefined {
  const steps = command.name === 'login' ? { ...NEXT_STEPS, ...LOGIN_NEXT_STEPS } : NEXT_STEPS;
  return steps[code as ErrorCode | ClientErrorCode]?.(command);
}
