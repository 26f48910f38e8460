'use strict';
// Memory JavaScript can take away (a resizable ArrayBuffer that shrinks, a
// growable SharedArrayBuffer, an ArrayBuffer transferred or detached) and
// views of buffers that go away: refused by name, or kept valid; never a
// dangling pointer. Before these rules, wrapping a resizable ArrayBuffer
// and resizing it to 0, or transferring a wrapped ArrayBuffer with
// structuredClone and collecting the clone, crashed the process (SIGSEGV)
// at the next write through the wrap.

const assert = require('node:assert/strict');
const { test } = require('node:test');
const { MessageChannel } = require('node:worker_threads');
const { dlb, nativeLibrary, settle } = require('./common');

const { DlbBuffer } = dlb;
const nl = nativeLibrary();

function refused(code, fn, message) {
  assert.throws(fn, (e) => {
    assert.ok(e instanceof dlb.DlbError, `a DlbError, not ${e}`);
    assert.equal(e.code, code, e.message);
    assert.equal(e.status, dlb.statuses[code]);
    assert.match(e.message, message);
    return true;
  });
}

async function collect() {
  for (let i = 0; i < 4; i++) {
    global.gc();
    await new Promise((resolve) => setImmediate(resolve));
  }
}

test('a resizable ArrayBuffer is refused, whole or through a view', () => {
  const kept = dlb.keptArrayBuffers();
  const ab = new ArrayBuffer(64, { maxByteLength: 128 });
  assert.equal(ab.resizable, true);
  refused('DLB_ERR_INVALID_ARGUMENT', () => DlbBuffer.wrap(ab, 'float32', [16]), /resizable/);
  refused('DLB_ERR_INVALID_ARGUMENT', () => DlbBuffer.wrap(new Float32Array(ab), 'float32', [16]), /resizable/);
  refused('DLB_ERR_INVALID_ARGUMENT', () => DlbBuffer.wrap(new DataView(ab, 8), 'uint8', [8]), /resizable/);
  ab.resize(0); // what crashed: a write through a wrap of ab after this
  assert.equal(dlb.keptArrayBuffers(), kept, 'nothing kept');
  // A copy of its bytes is a fixed ArrayBuffer, which wraps.
  const fixed = new ArrayBuffer(64, { maxByteLength: 128 }).slice(0);
  assert.equal(fixed.resizable, false);
  const b = DlbBuffer.wrap(fixed, 'float32', [16]);
  b.close();
});

test('a growable SharedArrayBuffer is refused; a fixed one is shared memory, wrapped', () => {
  const growable = new SharedArrayBuffer(64, { maxByteLength: 128 });
  refused('DLB_ERR_INVALID_ARGUMENT', () => DlbBuffer.wrap(new Float64Array(growable), 'float64', [8]), /growable/);
  const sab = new SharedArrayBuffer(64);
  const x = new Float64Array(sab);
  const b = DlbBuffer.wrap(x, 'float64', [8]);
  const t = b.exportVersioned();
  nl.store(t.address, true, 3, 42);
  assert.equal(x[3], 42, 'the native write is in the SharedArrayBuffer');
  t.close();
  b.close();
});

test('a wrapped ArrayBuffer transferred by structuredClone keeps its memory', async () => {
  const n = 16 * 1024 * 1024; // 64 MiB of float32
  const ab = new ArrayBuffer(4 * n);
  const x = new Float32Array(ab);
  x[n - 1] = 5;
  const b = DlbBuffer.wrap(ab, 'float32', [n]);
  let clone;
  try {
    clone = structuredClone(ab, { transfer: [ab] }); // copied, or refused: never detached
  } catch (e) {
    assert.equal(e.name, 'DataCloneError', String(e));
  }
  assert.equal(ab.byteLength, 4 * n, 'the wrapped ArrayBuffer is not detached');
  clone = null;
  await collect();
  const view = b.typedArray();
  view[n - 1] += 1; // what crashed: a write into memory the clone took and freed
  assert.equal(x[n - 1], 6, 'the wrap and the ArrayBuffer are one memory');
  const t = b.exportVersioned();
  assert.equal(nl.data(t.address, true), b.address);
  t.close();
  b.close();
});

test('a wrapped ArrayBuffer in a postMessage transfer list stays put', async () => {
  const x = new Float64Array([1, 2, 3, 4]);
  const b = DlbBuffer.wrap(x, 'float64', [4]);
  const { port1, port2 } = new MessageChannel();
  const got = new Promise((resolve) => port2.once('message', resolve));
  try {
    port1.postMessage(x, [x.buffer]);
  } catch (e) {
    assert.equal(e.name, 'DataCloneError', String(e));
  }
  port1.close();
  await Promise.race([got, new Promise((resolve) => setTimeout(resolve, 200))]);
  port2.close();
  assert.equal(x.buffer.byteLength, 32, 'not detached');
  const t = b.exportVersioned();
  assert.equal(nl.sum(t.address, true), 10);
  t.close();
  b.close();
});

test('a detached ArrayBuffer is refused, as is a view over one', () => {
  const ab = new ArrayBuffer(32);
  const x = new Float64Array(ab);
  structuredClone(ab, { transfer: [ab] });
  assert.equal(ab.byteLength, 0);
  const kept = dlb.keptArrayBuffers();
  refused('DLB_ERR_DELETED', () => DlbBuffer.wrap(ab, 'float64', [0]), /detached/);
  refused('DLB_ERR_DELETED', () => DlbBuffer.wrap(x, 'float64', [0]), /detached/);
  assert.equal(dlb.keptArrayBuffers(), kept);
});

test('a view of dlbridge memory cannot be transferred away from the buffer', async () => {
  const b = DlbBuffer.alloc('int32', [1 << 20]);
  const view = b.arrayBuffer();
  try {
    structuredClone(view, { transfer: [view] });
  } catch (e) {
    assert.equal(e.name, 'DataCloneError', String(e));
  }
  assert.equal(view.byteLength, 4 << 20, 'the view is not detached');
  b.close();
  await collect();
  new Int32Array(view)[7] = 7; // still the buffer's memory: the view holds it
  assert.equal(new Int32Array(view)[7], 7);
});

test('views outlive close() and delete(); new views of a deleted buffer are refused', () => {
  const b = DlbBuffer.alloc('float64', [4]);
  const v = b.typedArray();
  v.set([1, 2, 3, 4]);
  b.delete();
  refused('DLB_ERR_DELETED', () => b.arrayBuffer(), /deleted/);
  b.close();
  global.gc();
  v[3] = 40; // the view's own reference keeps the memory
  assert.deepEqual(Array.from(v), [1, 2, 3, 40]);
});

test('the host-view rule is the library\'s: strided and read-only memory refused', () => {
  const calls = nl.stridedDeletes();
  const s = DlbBuffer.fromTensor(dlb.ManagedTensor.adopt(nl.makeStrided(), { versioned: false }));
  assert.deepEqual(s.strides, [2]);
  assert.throws(() => s.arrayBuffer(), (e) => e instanceof dlb.DlbError && e.code === 'DLB_ERR_UNSUPPORTED_LAYOUT' &&
    e.message.length > 0);
  s.close();
  assert.equal(nl.stridedDeletes(), calls + 1, 'the strided tensor\'s deleter ran once');
  const src = DlbBuffer.alloc('uint8', [3]);
  const ro = DlbBuffer.fromTensor(src.exportVersioned({ readOnly: true }));
  refused('DLB_ERR_READ_ONLY', () => ro.arrayBuffer(), /read-only/);
  ro.close();
  src.close();
});

test('nothing left', async () => {
  await settle(() => dlb.liveExports() === 0 && dlb.keptArrayBuffers() === 0);
  assert.equal(dlb.liveExports(), 0);
  assert.equal(dlb.keptArrayBuffers(), 0);
});
