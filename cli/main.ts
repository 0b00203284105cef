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

/** Ctrl-C, a stop, or the terminal closed (SIGHUP): each ends in the same ordered shutdown. */
export function untilSignal(): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    for (const signal of ['SIGHUP', 'SIGINT', 'SIGTERM'] as const)
      process.once(signal, () => resolve(signal));
  });
}
