// Jest runs each test file in a realm of its own, whose typed-array constructors are not Node's.
// onnxruntime-node makes its output tensors from Node's typed arrays, and onnxruntime-common
// checks them with `instanceof` against the realm's, so every inference fails under plain Jest
// ("A float32 tensor's data must be type of function Float32Array()"). A test file that runs
// ONNX Runtime in-process names this environment in a docblock:
//   /** @jest-environment ./test/support/onnx-environment.js */
// and its realm gets Node's own typed arrays.
const { TestEnvironment } = require('jest-environment-node');

const shared = [
  'ArrayBuffer',
  'SharedArrayBuffer',
  'DataView',
  'Int8Array',
  'Uint8Array',
  'Uint8ClampedArray',
  'Int16Array',
  'Uint16Array',
  'Int32Array',
  'Uint32Array',
  'Float32Array',
  'Float64Array',
  'BigInt64Array',
  'BigUint64Array',
];

class OnnxEnvironment extends TestEnvironment {
  constructor(config, context) {
    super(config, context);
    for (const name of shared) this.global[name] = globalThis[name];
  }
}

module.exports = OnnxEnvironment;
