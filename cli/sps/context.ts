import { createInterface } from 'node:readline/promises';
import { createClient, type SpsClient } from '../../sdk';
import { nodeFetch } from '../../sdk/node';
import { type Login, resolveLogin, UsageError } from './config';
import { createProgress, type Progress } from './output';

export interface GlobalOptions {
  json?: boolean;
  baseUrl?: string;
}

export interface Context {
  json: boolean;
  /** Bars and prompts: stdout is a terminal and no `--json`. */
  interactive: boolean;
  /** Aborted on Ctrl-C: every request and write stops, temporary files stay temporary. */
  signal: AbortSignal;
  connect(): Promise<{ client: SpsClient; login: Login }>;
  /** The human text, or with `--json` the data as one JSON document, on stdout. */
  print(human: () => string, data: unknown): void;
  progress(): Progress;
  /** A yes/no question on the terminal; false when no one can answer it. */
  confirm(question: string): Promise<boolean>;
}

export function createContext(options: GlobalOptions, signal: AbortSignal): Context {
  const json = options.json === true;
  const interactive = !json && process.stdout.isTTY === true;
  return {
    json,
    interactive,
    signal,
    async connect() {
      const login = await resolveLogin({ baseUrl: options.baseUrl });
      return { login, client: createClient({ ...login, fetch: nodeFetch }) };
    },
    print(human, data) {
      process.stdout.write(`${json ? JSON.stringify(data, null, 2) : human()}\n`);
    },
    progress: () => createProgress(interactive),
    async confirm(question) {
      if (!process.stdin.isTTY) {
        throw new UsageError(`${question} Not asked: stdin is not a terminal; pass --yes to proceed`);
      }
      const prompt = createInterface({ input: process.stdin, output: process.stderr });
      try {
        const answer = await prompt.question(`${question} [y/N] `, { signal });
        return /^y(es)?$/i.test(answer.trim());
      } finally {
        prompt.close();
      }
    },
  };
}
