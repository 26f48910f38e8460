'use strict';
// dlbridge for Node.js: DLPack tensors over libdlbridge, through the N-API
// addon in src/dlbridge_node.c (found by lib/addon.js: built on install, or
// the prebuilt one the package carries).
//
// - DlbBuffer: a handle on a dlb_buffer (new memory, a JavaScript
//   ArrayBuffer wrapped without a copy, shared memory, an imported tensor).
//   Its views are ArrayBuffers over the buffer's memory that hold it alive
//   until they are collected.
// - ManagedTensor: an owned DLManagedTensorVersioned* or DLManagedTensor*,
//   for native code that takes DLPack (by address, a BigInt) and from it.
// - close() releases at once; a finalizer releases what was never closed,
//   as a backstop.
// - Refusals are DlbError: `code` is the library's status name
//   (codes.DLB_ERR_DELETED), `status` its number (statuses.DLB_ERR_DELETED);
//   both tables come from the library's dlb_status_name().

const { markAsUntransferable } = require('node:worker_threads');
const native = require('./lib/addon').load();

const kHandle = Symbol('dlbridge handle');
const kMake = Symbol('dlbridge constructor');

/** The library's status names, by number (DLB_OK first). */
const STATUS_NAMES = Object.freeze(native.statusNames());
/** Each status name to itself: compare err.code with codes.DLB_ERR_DELETED. */
const codes = Object.freeze(Object.fromEntries(STATUS_NAMES.map((n) => [n, n])));
/** Each status name to its fixed number (err.status). */
const statuses = Object.freeze(Object.fromEntries(STATUS_NAMES.map((n, i) => [n, i])));

/** A refusal of the library: its status name (`code`), number and message. */
class DlbError extends Error {
  constructor(message, code, status) {
    super(message);
    this.code = code;
    this.status = status;
  }

  get name() { return 'DlbError'; }
}
native.init(DlbError);

function refuse(status, message) {
  throw new DlbError(message, STATUS_NAMES[status], status);
}

// The TypedArray of each dtype name the library writes, where JavaScript has one.
const TYPED_ARRAYS = {
  int8: Int8Array, uint8: Uint8Array, int16: Int16Array, uint16: Uint16Array,
  int32: Int32Array, uint32: Uint32Array, int64: BigInt64Array, uint64: BigUint64Array,
  float32: Float32Array, float64: Float64Array, bool: Uint8Array,
};

class ManagedTensor {
  constructor(token, handle) {
    if (token !== kMake) throw new TypeError('use DlbBuffer#exportVersioned, DlbBuffer#exportLegacy or ManagedTensor.adopt');
    this[kHandle] = handle;
  }

  /** Takes ownership of a tensor a native library made, by its address. */
  static adopt(address, { versioned = true } = {}) {
    return new ManagedTensor(kMake, native.adopt(address, versioned));
  }

  /** True for a DLManagedTensorVersioned, false for a legacy DLManagedTensor. */
  get versioned() { return native.tensorVersioned(this[kHandle]); }

  /** The struct's address (a BigInt), lent: the tensor stays owned here. */
  get address() { return native.tensorAddress(this[kHandle], false); }

  /** Gives up ownership and returns the address, for a consumer that runs the deleter. */
  transfer() { return native.tensorAddress(this[kHandle], true); }

  /** Runs the deleter, unless the tensor was imported or handed on; again: nothing. */
  close() { native.closeTensor(this[kHandle]); }
}

// The memory under an ArrayBuffer, TypedArray or DataView must stay where it
// is while the library holds it: a resizable ArrayBuffer can shrink under it
// and a growable SharedArrayBuffer changes size, so both are refused; a
// fixed one is marked untransferable, so that structuredClone and
// postMessage copy it instead of detaching it (a detached one is refused by
// the addon).
function fixedMemory(memory) {
  const ab = ArrayBuffer.isView(memory) ? memory.buffer : memory;
  if (ab && ab.resizable === true) {
    refuse(statuses.DLB_ERR_INVALID_ARGUMENT, 'the ArrayBuffer is resizable: resize() could shrink it under the tensor; ' +
      'wrap a fixed-length ArrayBuffer (or a copy: ab.slice())');
  }
  if (ab && ab.growable === true) {
    refuse(statuses.DLB_ERR_INVALID_ARGUMENT, 'the SharedArrayBuffer is growable: wrap a fixed-length one (or a copy)');
  }
  return ab;
}

class DlbBuffer {
  constructor(token, handle) {
    if (token !== kMake) {
      throw new TypeError('use DlbBuffer.alloc, DlbBuffer.wrap, DlbBuffer.fromTensor or DlbBuffer.openTicket');
    }
    this[kHandle] = handle;
  }

  /** New zero-filled host memory, compact row-major: alloc('float32', [2, 3]). */
  static alloc(dtype, shape) { return new DlbBuffer(kMake, native.alloc(dtype, shape, false)); }

  /** New zero-filled memory another process can map (issueTicket). */
  static allocShared(dtype, shape) { return new DlbBuffer(kMake, native.alloc(dtype, shape, true)); }

  /**
   * The memory of an ArrayBuffer, TypedArray or DataView, without a copy;
   * the ArrayBuffer is kept alive until the library releases it (the last
   * handle and the last export gone), and is marked untransferable.
   */
  static wrap(memory, dtype, shape) {
    const ab = fixedMemory(memory);
    const b = new DlbBuffer(kMake, native.wrap(memory, dtype, shape));
    if (ab instanceof ArrayBuffer) markAsUntransferable(ab);
    return b;
  }

  /** Imports a tensor: on success the buffer owns it and `tensor` is spent. */
  static fromTensor(tensor) {
    if (!(tensor instanceof ManagedTensor)) throw new TypeError('fromTensor takes a ManagedTensor');
    return new DlbBuffer(kMake, native.importTensor(tensor[kHandle]));
  }

  /**
   * Opens a ticket another process issued (bytes): the same memory, mapped
   * here. Once. The open waits for the issuer's answer (up to 20 s) on a
   * thread of libuv's pool, so the event loop goes on meanwhile.
   */
  static openTicket(ticket) {
    return native.openTicketAsync(ticket).then((handle) => new DlbBuffer(kMake, handle));
  }

  /** openTicket() on this thread: blocks the event loop while it waits. */
  static openTicketSync(ticket) { return new DlbBuffer(kMake, native.openTicket(ticket)); }

  get shape() { return native.info(this[kHandle]).shape; }
  get strides() { return native.info(this[kHandle]).strides; }
  get dtype() { return native.info(this[kHandle]).dtype; }
  get nbytes() { return native.info(this[kHandle]).nbytes; }
  /** The address of the first element, a BigInt. */
  get address() { return native.info(this[kHandle]).address; }
  get readOnly() { return native.flags(this[kHandle]).readOnly; }
  get deleted() { return native.flags(this[kHandle]).deleted; }

  /**
   * An ArrayBuffer over the elements, without a copy; it holds the memory
   * alive until it is collected, and cannot be transferred. The library
   * decides which buffers have one (dlb_buffer_host_view): not read-only
   * memory (JavaScript has no read-only ArrayBuffer), strided tensors,
   * device memory or a backend's storage.
   */
  arrayBuffer() {
    const ab = native.view(this[kHandle]);
    markAsUntransferable(ab);
    return ab;
  }

  /** arrayBuffer() as the TypedArray of the dtype (Float32Array for 'float32', ...). */
  typedArray() {
    const dtype = this.dtype;
    const Typed = TYPED_ARRAYS[dtype];
    if (!Typed) throw new TypeError(`JavaScript has no TypedArray for '${dtype}'; use arrayBuffer()`);
    return new Typed(this.arrayBuffer());
  }

  /** A DLManagedTensorVersioned; copy: 'ifNeeded' (default), 'never', 'always'. */
  exportVersioned({ copy, readOnly = false } = {}) {
    return new ManagedTensor(kMake, native.exportTensor(this[kHandle], true, copy, readOnly));
  }

  /** A legacy DLManagedTensor (read-only memory: a copy, or refused with copy 'never'). */
  exportLegacy({ copy } = {}) {
    return new ManagedTensor(kMake, native.exportTensor(this[kHandle], false, copy, false));
  }

  /** A ticket (a Node Buffer of bytes) another process of this machine opens once. */
  issueTicket() { return native.issueTicket(this[kHandle]); }

  /** Deletes (donates): later exports and views fail with DLB_ERR_DELETED. */
  delete() { native.deleteBuffer(this[kHandle]); }

  /** Drops this handle's reference; again: nothing. */
  close() { native.closeBuffer(this[kHandle]); }
}

if (Symbol.dispose) {
  DlbBuffer.prototype[Symbol.dispose] = DlbBuffer.prototype.close;
  ManagedTensor.prototype[Symbol.dispose] = ManagedTensor.prototype.close;
}

/** The library's version string. */
const version = native.version();
/** Managed tensors the library exported whose deleter has not run. */
const liveExports = native.liveExports;
/** ArrayBuffers kept alive for the library (for leak checks). */
const keptArrayBuffers = native.pinned;

module.exports = {
  DlbBuffer,
  ManagedTensor,
  DlbError,
  codes,
  statuses,
  version,
  liveExports,
  keptArrayBuffers,
};
