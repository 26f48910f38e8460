'use strict';
// dlbridge for Node.js: DLPack tensors over libdlbridge, through the N-API
// addon in src/dlbridge_node.c (build/Release/dlbridge_node.node).
//
// - Buffer: a handle on a dlb_buffer (new memory, a JavaScript ArrayBuffer
//   wrapped without a copy, shared memory, an imported tensor). Its views
//   are ArrayBuffers over the buffer's memory that hold it alive until they
//   are collected.
// - ManagedTensor: an owned DLManagedTensorVersioned* or DLManagedTensor*,
//   for native code that takes DLPack (by address, a BigInt) and from it.
// - close() releases at once; a finalizer releases what was never closed,
//   as a backstop. Refusals of the library are Errors whose `code` is the
//   status name ('DLB_ERR_DELETED') and `status` its number; a closed handle
//   is Error code 'ERR_USE_AFTER_CLOSE'.

const path = require('path');

const native = require(path.join(__dirname, 'build', 'Release', 'dlbridge_node.node'));

const kHandle = Symbol('dlbridge handle');
const kMake = Symbol('dlbridge constructor');

// The TypedArray of each dtype name the library writes, where JavaScript has one.
const TYPED_ARRAYS = {
  int8: Int8Array, uint8: Uint8Array, int16: Int16Array, uint16: Uint16Array,
  int32: Int32Array, uint32: Uint32Array, int64: BigInt64Array, uint64: BigUint64Array,
  float32: Float32Array, float64: Float64Array, bool: Uint8Array,
};

class ManagedTensor {
  constructor(token, handle) {
    if (token !== kMake) throw new TypeError('use Buffer#exportVersioned, Buffer#exportLegacy or ManagedTensor.adopt');
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

class Buffer {
  constructor(token, handle) {
    if (token !== kMake) throw new TypeError('use Buffer.alloc, Buffer.wrap, Buffer.fromTensor or Buffer.openTicket');
    this[kHandle] = handle;
  }

  /** New zero-filled host memory, compact row-major: alloc('float32', [2, 3]). */
  static alloc(dtype, shape) { return new Buffer(kMake, native.alloc(dtype, shape, false)); }

  /** New zero-filled memory another process can map (issueTicket). */
  static allocShared(dtype, shape) { return new Buffer(kMake, native.alloc(dtype, shape, true)); }

  /**
   * The memory of an ArrayBuffer, TypedArray or DataView, without a copy;
   * the ArrayBuffer is kept alive until the library releases it (the last
   * handle and the last export gone). Do not transfer it meanwhile.
   */
  static wrap(memory, dtype, shape) { return new Buffer(kMake, native.wrap(memory, dtype, shape)); }

  /** Imports a tensor: on success the buffer owns it and `tensor` is spent. */
  static fromTensor(tensor) {
    if (!(tensor instanceof ManagedTensor)) throw new TypeError('fromTensor takes a ManagedTensor');
    return new Buffer(kMake, native.importTensor(tensor[kHandle]));
  }

  /** Opens a ticket another process issued (bytes): the same memory, mapped here. Once. */
  static openTicket(ticket) { return new Buffer(kMake, native.openTicket(ticket)); }

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
   * alive until it is collected. Refused for read-only memory (JavaScript
   * has no read-only ArrayBuffer) and for strided tensors.
   */
  arrayBuffer() { return native.view(this[kHandle]); }

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
  Buffer.prototype[Symbol.dispose] = Buffer.prototype.close;
  ManagedTensor.prototype[Symbol.dispose] = ManagedTensor.prototype.close;
}

module.exports = {
  Buffer,
  ManagedTensor,
  version: native.version(),
  /** Managed tensors the library exported whose deleter has not run. */
  liveExports: native.liveExports,
  /** ArrayBuffers kept alive for the library (for leak checks). */
  keptArrayBuffers: native.pinned,
};
