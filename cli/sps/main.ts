import { Command, CommanderError } from 'commander';
import { isSpsError } from '../../sdk';
import { registerDownload } from './commands/download';
import { registerJobs } from './commands/jobs';
import { registerLogin } from './commands/login';
import { registerPredict } from './commands/predict';
import { registerResults } from './commands/results';
import { registerSamples } from './commands/samples';
import { registerUpload } from './commands/upload';
import { UsageError } from './config';
import { createContext, type GlobalOptions } from './context';
import { exitCodeOf, exitCodes } from './exit-codes';
import { nextStepAfter, type RefusedCommand } from './hints';

/** `sps`: the command line of the Slide Prediction Service, a client of the SDK only. */
export async function main(argv: string[]): Promise<number> {
  const interrupt = new AbortController();
  process.once('SIGINT', () => {
    interrupt.abort(new Error('interrupted'));
    // A second Ctrl-C does not wait for cleanup; temporary files are still only temporary.
    process.once('SIGINT', () => process.exit(exitCodes.interrupted));
  });
  const program = new Command('sps')
    .description('Slide Prediction Service command line (docs/cli.md lists its exit codes)')
    .option('--json', 'print JSON for scripts instead of tables')
    .option('--base-url <url>', 'the service URL (else SPS_BASE_URL, else the saved login)')
    .exitOverride()
    .configureOutput({ writeErr: (text) => process.stderr.write(text) });
  const context = () => createContext(program.opts<GlobalOptions>(), interrupt.signal);
  registerLogin(program, context);
  registerUpload(program, context);
  registerSamples(program, context);
  registerPredict(program, context);
  registerJobs(program, context);
  registerResults(program, context);
  registerDownload(program, context);
  for (const command of program.commands) command.exitOverride();
  let ran: RefusedCommand = { args: [] };
  program.hook('preAction', (_program, action) => {
    ran = { name: action.name(), args: action.args };
  });

  const json = argv.includes('--json');
  const fail = (code: string, message: string, exitCode: number, extra: object = {}) => {
    const hint = nextStepAfter(code, ran);
    process.stderr.write(
      json
        ? `${JSON.stringify({ error: code, message, ...extra })}\n`
        : `sps: ${code}: ${message}\n${hint ? `hint: ${hint}\n` : ''}`,
    );
    return exitCode;
  };
  try {
    await program.parseAsync(argv, { from: 'user' });
    return Number(process.exitCode ?? exitCodes.ok);
  } catch (err) {
    if (interrupt.signal.aborted)
      return fail('interrupted', 'stopped; rerun to continue', exitCodes.interrupted);
    if (err instanceof CommanderError) {
      return err.exitCode === 0 ? exitCodes.ok : exitCodes.usage;
    }
    if (err instanceof UsageError) return fail('usage', err.message, exitCodes.usage);
    if (isSpsError(err)) return fail(err.code, err.message, exitCodeOf(err), err.body ?? {});
    return fail(
      'failure',
      err instanceof Error ? (err.stack ?? err.message) : String(err),
      exitCodes.failure,
    );
  }
}

if (require.main === module) {
  main(process.argv.slice(2)).then((code) => process.exit(code));
}
