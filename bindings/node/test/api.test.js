'use strict';
// The package's faces: CommonJS and the ES module (package.json "exports")
// export the same names; error codes and numbers come from the library's
// own table (dlb_status_name) and match the names index.d.ts declares.

const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { pathToFileURL } = require('node:url');
const { test } = require('node:test');
const { dlb } = require('./common');

const pkgDir = path.dirname(require.resolve(process.env.DLBRIDGE_NODE || path.join(__dirname, '..')));
const pkg = JSON.parse(fs.readFileSync(path.join(pkgDir, 'package.json'), 'utf8'));

test('the ES module exports every name of the CommonJS module, as the same objects', async () => {
  const entry = pkg.exports['.'];
  assert.equal(path.resolve(pkgDir, entry.require), require.resolve(path.join(pkgDir, pkg.main)));
  const esm = await import(pathToFileURL(path.resolve(pkgDir, entry.import)).href);
  const names = Object.keys(dlb).sort();
  assert.deepEqual(Object.keys(esm).filter((k) => k !== 'default').sort(), names);
  for (const k of names) assert.equal(esm[k], dlb[k], k);
  assert.ok(names.includes('liveExports'));
  assert.ok(!names.includes('Buffer'), 'no export named Buffer: Node\'s global stays visible');
  assert.equal(esm.default, dlb);
  assert.ok(fs.existsSync(path.resolve(pkgDir, entry.types)));
});

test('status names and numbers are the library\'s', () => {
  const names = Object.keys(dlb.statuses);
  assert.equal(names[0], 'DLB_OK');
  assert.equal(dlb.statuses.DLB_OK, 0);
  assert.equal(dlb.statuses.DLB_ERR_DELETED, 3, 'the fixed number');
  assert.equal(dlb.statuses.DLB_ERR_INTERNAL, 14);
  names.forEach((n, i) => {
    assert.equal(dlb.statuses[n], i);
    assert.equal(dlb.codes[n], n);
  });
  assert.ok(Object.isFrozen(dlb.codes) && Object.isFrozen(dlb.statuses));
  // index.d.ts declares the same names, in the same order.
  const dts = fs.readFileSync(path.join(pkgDir, 'index.d.ts'), 'utf8');
  const union = dts.slice(dts.indexOf('export type StatusName'), dts.indexOf(';', dts.indexOf('export type StatusName')));
  assert.deepEqual(union.match(/'[A-Z_]+'/g).map((s) => s.slice(1, -1)), names);
});

test('a refusal is a DlbError with the library\'s status, name and message', () => {
  assert.throws(() => dlb.DlbBuffer.alloc('float32', [2, -3]), (e) => {
    assert.ok(e instanceof dlb.DlbError && e instanceof Error);
    assert.equal(e.name, 'DlbError');
    assert.equal(e.code, dlb.codes.DLB_ERR_MALFORMED);
    assert.equal(e.status, dlb.statuses.DLB_ERR_MALFORMED);
    assert.match(e.message, /-3/);
    assert.match(String(e.stack), /DlbError/);
    return true;
  });
});
