// Loaded first on a worker thread whose entry is a TypeScript source (see ts-workers.ts): compiles
// each .ts module it requires with @swc/core, with the options jest.config.js gives @swc/jest.
'use strict';
const { readFileSync } = require('node:fs');
const swc = require('@swc/core');

require.extensions['.ts'] = (module, file) => {
  const { code } = swc.transformSync(readFileSync(file, 'utf8'), {
    filename: file,
    jsc: { target: 'es2023', parser: { syntax: 'typescript' } },
    // A dynamic import stays one, as tsc leaves it under nodenext: h5wasm can only be imported.
    module: { type: 'commonjs', ignoreDynamic: true },
  });
  module._compile(code, file);
};
