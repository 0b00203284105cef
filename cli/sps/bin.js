#!/usr/bin/env node
// The `sps` bin: runs the built command line from dist/ on Node 22 or later.
const path = require('node:path');

const major = Number(process.versions.node.split('.')[0]);
if (major < 22) {
  process.stderr.write(`sps needs Node.js 22 or later; this is ${process.version}\n`);
  process.exit(2);
}
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
