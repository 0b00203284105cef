import { ConfigError } from './config';

/** Runs an entry point; a configuration problem prints its message alone and exits 1. */
export function runMain(main: () => Promise<void>): void {
  main().catch((err: unknown) => {
    const message =
      err instanceof ConfigError
        ? err.message
        : err instanceof Error
          ? (err.stack ?? err.message)
          : String(err);
    process.stderr.write(`${message}\n`);
    process.exit(1);
  });
}

/** A signal this long after the first is a second Ctrl-C: stop at once. */
const FORCE_AFTER_MS = 1000;

/**
 * Ctrl-C, a stop, or the terminal closed (SIGHUP): each ends in the same ordered shutdown. The
 * launchers in front of a process (npm, scripts/bootstrap.js) pass a Ctrl-C on while the
 * terminal sends it too: copies right after the first are that same press, not a second one.
 */
export function untilSignal(): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    let first: number | undefined;
    const received = (signal: NodeJS.Signals) => {
      if (first === undefined) {
        first = Date.now();
        resolve(signal);
      } else if (Date.now() - first > FORCE_AFTER_MS) {
        process.exit(130);
      }
    };
    for (const signal of ['SIGHUP', 'SIGINT', 'SIGTERM'] as const) process.on(signal, received);
  });
}
