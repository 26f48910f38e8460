'use strict';
// The binding against tests/lang's native library (a DLPack consumer and
// producer that counts its deleters), in one process.

const assert = require('node:assert/strict');
const { test } = require('node:test');
const { Worker } = require('node:worker_threads');
const { dlb, nativeLibrary, settle } = require('./common');

const nl = nativeLibrary();
const { DlbBuffer: DlBuffer, ManagedTensor } = dlb;

// A refusal: the library's status (a DlbError whose code is in dlb.codes and
// whose status is that code's number), or a JavaScript type error.
function refused(code, fn, message) {
  assert.throws(fn, (e) => {
    assert.equal(e.code, code, e.message);
    assert.ok(e.message.length > 0);
    if (code.startsWith('DLB_')) {
      assert.ok(e instanceof dlb.DlbError, `${code} is a DlbError`);
      assert.equal(e.code, dlb.codes[code]);
      assert.equal(e.status, dlb.statuses[code]);
    }
    if (message) assert.match(e.message, message);
    return true;
  });
}

test('allocate, view, export to a native consumer', () => {
  const live = dlb.liveExports();
  const b = DlBuffer.alloc('float64', [2, 3]);
  assert.deepEqual(b.shape, [2, 3]);
  assert.deepEqual(b.strides, [3, 1]);
  assert.equal(b.dtype, 'float64');
  assert.equal(b.nbytes, 48);
  const x = b.typedArray();
  assert.ok(x instanceof Float64Array && x.length === 6);
  x.set([0.5, 1.5, 2.5, 3.5, 4.5, 5.5]);
  const t = b.exportVersioned();
  assert.equal(dlb.liveExports(), live + 1);
  assert.equal(t.versioned, true);
  assert.equal(nl.data(t.address, true), b.address, 'the export is the buffer\'s memory');
  assert.equal(nl.sum(t.address, true), 18, 'the native library reads what JavaScript wrote');
  nl.store(t.address, true, 5, -1);
  assert.equal(x[5], -1, 'JavaScript sees the native library\'s write');
  assert.equal(nl.consume(t.transfer(), true), 11.5);
  assert.equal(dlb.liveExports(), live, 'the consumer ran the deleter');
  t.close(); // handed on: nothing to do
  b.close();
  b.close();
});

test('an ArrayBuffer wrapped, zero-copy both ways', () => {
  const memory = new ArrayBuffer(16 + 4 * 8);
  const x = new Float64Array(memory, 16, 4);
  x.set([10, 11, 12, 13]);
  const b = DlBuffer.wrap(x, 'float64', [4]);
  const t = b.exportLegacy();
  assert.equal(nl.data(t.address, false), b.address);
  assert.equal(nl.sum(t.address, false), 46);
  nl.store(t.address, false, 2, 7.5);
  assert.equal(x[2], 7.5, 'the write landed in the ArrayBuffer');
  t.close();
  const back = DlBuffer.fromTensor(b.exportVersioned());
  assert.equal(back.address, b.address, 'a round trip keeps the memory');
  back.typedArray()[0] = -10;
  assert.equal(x[0], -10, 'a view of the wrap is the ArrayBuffer\'s memory');
  back.close();
  b.close();
  const whole = DlBuffer.wrap(new ArrayBuffer(8), 'int32', [2]); // an ArrayBuffer itself
  assert.equal(whole.nbytes, 8);
  whole.close();
});

test('a wrapped ArrayBuffer stays alive while an export lives', async () => {
  await settle(() => dlb.keptArrayBuffers() === 0);
  let t = (() => {
    const b = DlBuffer.wrap(new Float64Array(1000).fill(1), 'float64', [1000]);
    const e = b.exportVersioned();
    b.close();
    return e;
  })();
  // Only the export refers to the memory now.
  for (let i = 0; i < 5; i++) {
    global.gc();
    new ArrayBuffer(1 << 20);
    await new Promise((resolve) => setImmediate(resolve));
  }
  assert.equal(dlb.keptArrayBuffers(), 1);
  assert.equal(nl.sum(t.address, true), 1000, 'the memory is intact after collections');
  nl.consume(t.transfer(), true);
  assert.equal(dlb.keptArrayBuffers(), 0, 'dropped with the last export, on this thread at once');
  t = null;
});

test('a deleter run on a thread of the native library', async () => {
  await settle(() => dlb.keptArrayBuffers() === 0);
  const b = DlBuffer.wrap(new Float64Array([1, 2, 3]), 'float64', [3]);
  const t = b.exportVersioned();
  b.close();
  assert.equal(nl.consumeOnThread(t.transfer(), true), 6);
  assert.equal(dlb.liveExports(), 0, 'the deleter ran on that thread');
  assert.equal(dlb.keptArrayBuffers(), 1, 'the ArrayBuffer is let go on the JavaScript thread, not there');
  await settle(() => dlb.keptArrayBuffers() === 0);
  assert.equal(dlb.keptArrayBuffers(), 0, 'posted to this thread and dropped');
});

test('tensors of a native library imported, deleter once', async () => {
  const calls = nl.deleterCalls();
  const b = DlBuffer.fromTensor(ManagedTensor.adopt(nl.make(5, 10, true)));
  assert.deepEqual(b.shape, [5]);
  assert.equal(b.dtype, 'float64');
  assert.equal(nl.live(), 1);
  b.close();
  assert.equal(nl.deleterCalls(), calls + 1, 'closing the buffer ran the deleter, once');

  const legacy = ManagedTensor.adopt(nl.make(3, -1, false), { versioned: false });
  assert.equal(legacy.versioned, false);
  const c = DlBuffer.fromTensor(legacy);
  legacy.close(); // spent: nothing to do
  let view = c.typedArray();
  c.close();
  assert.equal(nl.deleterCalls(), calls + 1, 'the view holds the tensor');
  assert.deepEqual(Array.from(view), [-1, 0, 1], 'the library\'s values, read after close');
  view = null;
  await settle(() => nl.deleterCalls() === calls + 2);
  assert.equal(nl.deleterCalls(), calls + 2, 'released with the view');

  ManagedTensor.adopt(nl.make(2, 0, true)).close();
  assert.equal(nl.deleterCalls(), calls + 3, 'close runs the deleter of an adopted tensor');
});

test('an imported tensor exported on to the native library', () => {
  const calls = nl.deleterCalls();
  const live = dlb.liveExports();
  const b = DlBuffer.fromTensor(ManagedTensor.adopt(nl.make(4, 1, false), { versioned: false }));
  const t = b.exportVersioned();
  b.close();
  assert.equal(nl.deleterCalls(), calls, 'the export holds the library\'s tensor');
  assert.equal(nl.consume(t.transfer(), true), 10);
  assert.equal(nl.deleterCalls(), calls + 1);
  assert.equal(dlb.liveExports(), live);
});

test('read-only memory', () => {
  const src = DlBuffer.alloc('int32', [4]);
  src.typedArray().set([1, 2, 3, 4]);
  const ro = DlBuffer.fromTensor(src.exportVersioned({ readOnly: true }));
  assert.equal(ro.readOnly, true);
  refused('DLB_ERR_READ_ONLY', () => ro.arrayBuffer());
  refused('DLB_ERR_READ_ONLY', () => ro.exportLegacy({ copy: 'never' }));
  const copy = ro.exportLegacy(); // a copy, the consumer's own
  assert.notEqual(nl.data(copy.address, false), ro.address);
  copy.close();
  ro.close();
  src.close();
});

test('finalizers as the backstop of forgotten handles', async () => {
  const live = dlb.liveExports();
  const nlLive = nl.live();
  const calls = nl.deleterCalls();
  (() => {
    DlBuffer.alloc('int32', [8]).exportVersioned(); // both handles dropped unclosed
    ManagedTensor.adopt(nl.make(3, 0, true));
  })();
  assert.equal(dlb.liveExports(), live + 1);
  await settle(() => dlb.liveExports() === live && nl.live() === nlLive);
  assert.equal(dlb.liveExports(), live, 'the export\'s deleter ran');
  assert.equal(nl.live(), nlLive, 'and the adopted tensor\'s');
  assert.equal(nl.deleterCalls(), calls + 1, 'once');
});

test('bad input: closed, deleted, imported twice', () => {
  const b = DlBuffer.alloc('float32', [4]);
  b.close();
  b.close();
  refused('DLB_ERR_INVALID_ARGUMENT', () => b.exportVersioned(), /buffer is closed/);
  refused('DLB_ERR_INVALID_ARGUMENT', () => b.shape, /buffer is closed/);
  refused('DLB_ERR_INVALID_ARGUMENT', () => b.arrayBuffer(), /buffer is closed/);
  refused('DLB_ERR_INVALID_ARGUMENT', () => b.delete(), /buffer is closed/);
  const d = DlBuffer.alloc('float32', [4]);
  const before = d.exportVersioned();
  d.delete();
  assert.equal(d.deleted, true);
  refused('DLB_ERR_DELETED', () => d.exportVersioned());
  refused('DLB_ERR_DELETED', () => d.arrayBuffer());
  assert.throws(() => d.exportLegacy(), (e) => e.status === 3 && /deleted/.test(e.message));
  nl.consume(before.transfer(), true); // made before the delete: still valid
  d.close();
  const t = DlBuffer.alloc('float64', [2]).exportVersioned();
  const first = DlBuffer.fromTensor(t);
  refused('DLB_ERR_INVALID_ARGUMENT', () => DlBuffer.fromTensor(t), /imported/); // imported twice
  refused('DLB_ERR_INVALID_ARGUMENT', () => t.transfer(), /imported/);
  first.close();
});

test('bad input: dtype names, shapes, memory, handles, tickets', () => {
  refused('DLB_ERR_UNSUPPORTED_DTYPE', () => DlBuffer.alloc('float33', [2]));
  assert.throws(() => DlBuffer.alloc('float33', [2]), /float33/);
  refused('DLB_ERR_UNSUPPORTED_DTYPE', () => DlBuffer.alloc('float32'.padEnd(100, ' '), [2])); // not cut short
  refused('DLB_ERR_MALFORMED', () => DlBuffer.alloc('float32', [2, -3]));
  assert.throws(() => DlBuffer.alloc('float32', [2, -3]), /-3/);
  refused('DLB_ERR_INVALID_ARGUMENT', () => DlBuffer.alloc('float32', new Array(65).fill(1)));
  refused('ERR_INVALID_ARG_TYPE', () => DlBuffer.alloc('float32', [1.5]));
  refused('ERR_INVALID_ARG_TYPE', () => DlBuffer.alloc('float32', [NaN]));
  refused('ERR_INVALID_ARG_TYPE', () => DlBuffer.alloc(32, [1]));
  refused('ERR_INVALID_ARG_TYPE', () => DlBuffer.wrap('not memory', 'int8', [1]));
  refused('ERR_INVALID_ARG_VALUE', () => DlBuffer.alloc('int8', [1]).exportVersioned({ copy: 'sometimes' }));
  assert.throws(() => DlBuffer.fromTensor({}), TypeError);
  assert.throws(() => new DlBuffer(), TypeError);
  const kept = dlb.keptArrayBuffers();
  refused('DLB_ERR_MALFORMED', () => DlBuffer.wrap(new ArrayBuffer(8), 'int8', [-1]));
  refused('DLB_ERR_UNSUPPORTED_DTYPE', () => DlBuffer.wrap(new ArrayBuffer(8), 'complex7', [1]));
  assert.throws(() => DlBuffer.wrap(new Float64Array(8), 'float64', [9]),
    (e) => e instanceof RangeError && /72 bytes/.test(e.message));
  assert.equal(dlb.keptArrayBuffers(), kept, 'refused wraps keep nothing');
  refused('DLB_ERR_MALFORMED', () => DlBuffer.openTicketSync(new Uint8Array([1, 2, 3])));
  refused('ERR_INVALID_ARG_TYPE', () => DlBuffer.openTicketSync('ticket'));
  const plain = DlBuffer.alloc('int64', [2]);
  refused('DLB_ERR_NOT_ZERO_COPY', () => plain.issueTicket());
  plain.close();
});

test('bad input: tickets refused through the promise', async () => {
  await assert.rejects(DlBuffer.openTicket(new Uint8Array([1, 2, 3])),
    (e) => e instanceof dlb.DlbError && e.code === dlb.codes.DLB_ERR_MALFORMED && e.message.length > 0);
  assert.throws(() => DlBuffer.openTicket('ticket'), TypeError);
  const shared = DlBuffer.allocShared('int32', [2]);
  const ticket = shared.issueTicket();
  const opened = await DlBuffer.openTicket(ticket); // this process's own ticket
  opened.typedArray()[1] = 7;
  assert.equal(shared.typedArray()[1], 7, 'the same memory, mapped again');
  await assert.rejects(DlBuffer.openTicket(ticket), (e) => e.code === dlb.codes.DLB_ERR_DELETED && /open/.test(e.message),
    'a ticket opens once');
  refused('DLB_ERR_DELETED', () => DlBuffer.openTicketSync(ticket));
  opened.close();
  shared.close();
});

test('bad input: a malformed tensor stays its owner\'s', () => {
  const t = ManagedTensor.adopt(nl.makeMalformed(), { versioned: false });
  assert.throws(() => DlBuffer.fromTensor(t), (e) => e.code === 'DLB_ERR_MALFORMED' && /-1/.test(e.message));
  assert.equal(nl.malformedDeletes(), 0, 'a refused import runs no deleter');
  t.close(); // still the caller's
  assert.equal(nl.malformedDeletes(), 1, 'close ran it, once');
  t.close();
  assert.equal(nl.malformedDeletes(), 1);
});

test('a worker thread has its own environment', async () => {
  const script = `
    const { parentPort } = require('node:worker_threads');
    const dlb = require(${JSON.stringify(require.resolve(process.env.DLBRIDGE_NODE || '..'))});
    const nl = require(${JSON.stringify(process.env.DLB_TEST_NATIVE_ADDON)});
    const b = dlb.DlbBuffer.wrap(new Float32Array([1, 2, 3]), 'float32', [3]);
    const t = b.exportLegacy();
    b.close();
    nl.consumeOnThread(t.transfer(), false);
    const out = dlb.DlbBuffer.alloc('float64', [2]);
    out.typedArray().set([4, 5]);
    parentPort.postMessage(out.exportVersioned().transfer());  // dlbridge memory outlives the worker
    out.close();`;
  const address = await new Promise((resolve, reject) => {
    const w = new Worker(script, { eval: true });
    w.on('message', resolve);
    w.on('error', reject);
  });
  assert.equal(nl.consume(address, true), 9, 'a tensor the worker exported, consumed here');
});

test('nothing left: live exports, kept ArrayBuffers, native tensors', async () => {
  await settle(() => dlb.liveExports() === 0 && dlb.keptArrayBuffers() === 0 && nl.live() === 0);
  assert.equal(dlb.liveExports(), 0);
  assert.equal(dlb.keptArrayBuffers(), 0);
  assert.equal(nl.live(), 0);
});
