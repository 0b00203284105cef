import { spawn } from 'node:child_process';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

/** The built `cli/main.js`, as `npm start`, the API and the worker wait on it for their signal. */
const main = path.join(__dirname, '..', '..', 'dist', 'cli', 'main.js');

/**
 * A process that waits for its signal, then takes `shutdownMs` to stop in order: it says which
 * signal it got once ready, and `stopped in order` at the end of its shutdown.
 */
function waiting(shutdownMs: number) {
  const child = spawn(process.execPath, [
    '-e',
    `require(${JSON.stringify(main)}).untilSignal().then((signal) => {
       process.stdout.write('got ' + signal + '\\n');
       setTimeout(() => process.stdout.write('stopped in order\\n', () => process.exit(0)), ${shutdownMs});
     });
     // A server's socket keeps a real process alive meanwhile.
     setInterval(() => {}, 1000);
     process.stdout.write('ready\\n');`,
  ]);
  let stdout = '';
  child.stdout.on('data', (chunk) => (stdout += chunk));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const ready = new Promise<void>((resolve) => child.stdout.once('data', () => resolve()));
  return { child, ready, exited, output: () => stdout };
}

test('one Ctrl-C passed on by each launcher in front is one press: the shutdown runs to its end', async () => {
  const started = waiting(500);
  await started.ready;
  // The terminal's, then npm's and each bootstrap's copy, a moment apart.
  for (let copy = 0; copy < 3; copy++) {
    started.child.kill('SIGINT');
    await sleep(50);
  }
  await expect(started.exited).resolves.toBe(0);
  expect(started.output()).toBe('ready\ngot SIGINT\nstopped in order\n');
});

test('a closed terminal (SIGHUP) stops in order too; a second Ctrl-C later stops at once', async () => {
  const hungUp = waiting(200);
  await hungUp.ready;
  hungUp.child.kill('SIGHUP');
  await expect(hungUp.exited).resolves.toBe(0);
  expect(hungUp.output()).toBe('ready\ngot SIGHUP\nstopped in order\n');

  const slow = waiting(60_000);
  await slow.ready;
  slow.child.kill('SIGINT');
  await sleep(1500);
  slow.child.kill('SIGINT');
  await expect(slow.exited).resolves.toBe(130);
  expect(slow.output()).toBe('ready\ngot SIGINT\n');
});
