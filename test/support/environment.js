// Jest's node environment, with one change: the test context's global object is an ordinary
// object (vm.constants.DONT_CONTEXTIFY) rather than Jest's recording proxy behind Node's
// interceptors. Code run in such a context pays a C++ callback and a proxy trap for every
// global it names (Math, Number, Uint8Array...), which made hot loops of compute/ and of the
// tests' references some thirty times slower under Jest than in production (docs/testing.md).
const vm = require('node:vm');
const NodeEnvironment = require('jest-environment-node').default;

class PlainGlobalEnvironment extends NodeEnvironment {
  constructor(config, context) {
    const createContext = vm.createContext;
    vm.createContext = () => createContext(vm.constants.DONT_CONTEXTIFY);
    try {
      super(config, context);
    } finally {
      vm.createContext = createContext;
    }
  }
}

module.exports = PlainGlobalEnvironment;
