#!/usr/bin/env node
// The `sps` bin: runs the built command line from dist/ on Node 22 or later. On an older Node
// it runs itself again on the Node 22 that `npm start` and `npm run build` fetch (the same
// cache as scripts/bootstrap.js), so `npx sps` works wherever those did.
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const NODE_MAJOR = 22;

function runOnFetchedNode() {
  const cache = process.env.SPS_CACHE_DIR || path.join(os.homedir(), '.cache', 'sps');
  const node = path.join(cache, `node-${NODE_MAJOR}`, 'package', 'bin', 'node');
  if (!fs.existsSync(node)) {
    process.stderr.write(
      `sps needs Node.js ${NODE_MAJOR} or later; this is ${process.version}. ` +
        `\`npm run build\` in the project fetches it into ${cache}; or install Node.js ${NODE_MAJOR}\n`,
    );
    process.exit(2);
  }
  const child = spawn(node, [__filename, ...process.argv.slice(2)], { stdio: 'inherit' });
  child.once('error', (err) => {
    process.stderr.write(`sps cannot run ${node}: ${err.message}\n`);
    process.exit(2);
  });
  for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => child.kill(signal));
  child.on('exit', (code, signal) => process.exit(code ?? 128 + os.constants.signals[signal]));
}

function runBuilt() {
  const built = path.join(__dirname, '..', '..', 'dist', 'cli', 'sps', 'main.js');
  let cli;
  try {
    cli = require(built);
  } catch (err) {
    if (err.code !== 'MODULE_NOT_FOUND' || !String(err.message).includes(built)) throw err;
    process.stderr.write('sps is not built yet: run `npm run build` in the project first\n');
    process.exit(2);
  }
  cli.main(process.argv.slice(2)).then((code) => process.exit(code));
}

if (Number(process.versions.node.split('.')[0]) < NODE_MAJOR) runOnFetchedNode();
else runBuilt();
