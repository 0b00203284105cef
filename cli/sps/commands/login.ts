import { createInterface } from 'node:readline/promises';
import type { Command } from 'commander';
import { createClient } from '../../../sdk';
import { givenBaseUrl, saveLogin, serviceUrl, UsageError } from '../config';
import type { Context } from '../context';

/** One line of stdin: typed at a prompt on a terminal, else piped (`echo $KEY | sps login ...`). */
async function ask(question: string, signal: AbortSignal): Promise<string> {
  const prompt = createInterface({ input: process.stdin, output: process.stderr, terminal: false });
  try {
    if (process.stdin.isTTY) return (await prompt.question(question, { signal })).trim();
    for await (const line of prompt) return line.trim();
    return '';
  } finally {
    prompt.close();
  }
}

export function registerLogin(program: Command, context: () => Context): void {
  program
    .command('login')
    .description(
      'Save the service URL and an API key (0600, under $XDG_CONFIG_HOME/sps); SPS_BASE_URL and SPS_API_KEY override it',
    )
    .option('--api-key <key>', 'the API key (else asked for, or read from stdin)')
    .action(async (flags: { apiKey?: string }) => {
      const ctx = context();
      const globals = program.opts<{ baseUrl?: string }>();
      const given = givenBaseUrl(globals.baseUrl) ?? {
        url: await ask('Service URL: ', ctx.signal),
        from: 'the service URL',
      };
      const apiKey = flags.apiKey ?? (await ask('API key: ', ctx.signal));
      if (!given.url || !apiKey) throw new UsageError('a service URL and an API key are both needed');
      const baseUrl = serviceUrl(given.url, given.from);
      // A key that cannot read the marker catalog is wrong or revoked: say so now, not later.
      const markers = await createClient({ baseUrl, apiKey }).markers.list({ signal: ctx.signal });
      const file = await saveLogin({ baseUrl, apiKey });
      ctx.print(() => `Logged in to ${baseUrl} (${markers.count} markers available); saved to ${file}`, {
        baseUrl,
        config: file,
      });
    });
}
