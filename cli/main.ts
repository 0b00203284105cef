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

export function untilSignal(): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    process.once('SIGINT', () => resolve('SIGINT'));
    process.once('SIGTERM', () => resolve('SIGTERM'));
  });
}
