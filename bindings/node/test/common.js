'use strict';
// What the tests share: the binding under test (DLBRIDGE_NODE, the package
// folder scripts/test.d/59-node.sh built; default: this package), the
// native library's test addon (DLB_TEST_NATIVE_ADDON), and settle(), which
// collects until the finalizers have run what they should.

const assert = require('node:assert/strict');
const path = require('node:path');

assert.equal(typeof global.gc, 'function', 'run with node --expose-gc');

const dlb = require(process.env.DLBRIDGE_NODE || path.join(__dirname, '..'));

function nativeLibrary() {
  const addon = process.env.DLB_TEST_NATIVE_ADDON;
  assert.ok(addon, 'DLB_TEST_NATIVE_ADDON must name the native library\'s test addon (scripts/test.d/59-node.sh)');
  return require(addon);
}

// Finalizers run after a collection, from the event loop: collect and yield
// until `done()` holds, for at most about 10 s.
async function settle(done) {
  for (let i = 0; i < 500 && !done(); i++) {
    global.gc();
    await new Promise((resolve) => setTimeout(resolve, i < 10 ? 0 : 20));
  }
}

module.exports = { dlb, nativeLibrary, settle };
