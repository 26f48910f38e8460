// Type declarations of the dlbridge package (index.js, index.mjs). They are
// the JavaScript API reference (docs/reference/javascript-api.md is made
// from them); `tsc --noEmit --strict` checks them over
// bindings/node/types/example.ts.

/// <reference types="node" />

/** The library's status names, by fixed number (dlb_status_name). */
export type StatusName =
  | 'DLB_OK'
  | 'DLB_ERR_INVALID_ARGUMENT'
  | 'DLB_ERR_OUT_OF_MEMORY'
  | 'DLB_ERR_DELETED'
  | 'DLB_ERR_NOT_ZERO_COPY'
  | 'DLB_ERR_UNSUPPORTED_DTYPE'
  | 'DLB_ERR_UNSUPPORTED_DEVICE'
  | 'DLB_ERR_UNSUPPORTED_LAYOUT'
  | 'DLB_ERR_READ_ONLY'
  | 'DLB_ERR_VERSION'
  | 'DLB_ERR_OVERFLOW'
  | 'DLB_ERR_MALFORMED'
  | 'DLB_ERR_ALIGNMENT'
  | 'DLB_ERR_BACKEND'
  | 'DLB_ERR_INTERNAL';

/**
 * Each status name to itself, from the library's table at load time:
 * compare `err.code` with `codes.DLB_ERR_DELETED`.
 */
export declare const codes: Readonly<{ [K in StatusName]: K }>;

/** Each status name to its fixed number (`err.status`). */
export declare const statuses: Readonly<Record<StatusName, number>>;

/**
 * A refusal of the library: `code` is the status name, `status` its number,
 * `message` the library's message ("shape[1] is -3 ..."). A closed handle,
 * a tensor imported twice, a resizable or growable ArrayBuffer given to
 * wrap(): DLB_ERR_INVALID_ARGUMENT; a detached ArrayBuffer: DLB_ERR_DELETED.
 * Arguments of the wrong JavaScript type are TypeErrors
 * (code 'ERR_INVALID_ARG_TYPE'), memory smaller than the tensor a
 * RangeError ('ERR_OUT_OF_RANGE').
 */
export declare class DlbError extends Error {
  readonly code: StatusName;
  readonly status: number;
  readonly name: 'DlbError';
}

/** Element type names the library knows ('float32', 'int64', 'bfloat16', 'complex64', ...). */
export type DType = string;

/** Copy policy of an export: zero-copy when possible (default), never copy, always copy. */
export type CopyPolicy = 'ifNeeded' | 'never' | 'always';

/** Memory that DlbBuffer.wrap takes without a copy. */
export type WrappableMemory = ArrayBuffer | ArrayBufferView;

/**
 * An owned DLManagedTensorVersioned* or legacy DLManagedTensor*. Its deleter
 * runs exactly once: close() runs it, unless it was imported
 * (DlbBuffer.fromTensor) or handed on (transfer()); a finalizer runs it for
 * a tensor never closed.
 */
export declare class ManagedTensor {
  private constructor();
  /**
   * Takes ownership of a tensor a native library made, by its address.
   * The address is trusted: it must be a live managed tensor of the kind
   * `versioned` says (default true).
   */
  static adopt(address: bigint, options?: { versioned?: boolean }): ManagedTensor;
  /** True for a DLManagedTensorVersioned, false for a legacy DLManagedTensor. */
  readonly versioned: boolean;
  /** The struct's address, lent: the tensor stays owned here. */
  readonly address: bigint;
  /** Gives up ownership and returns the address, for a consumer that runs the deleter. */
  transfer(): bigint;
  /** Runs the deleter, unless the tensor was imported or handed on; again: nothing. */
  close(): void;
  [Symbol.dispose](): void;
}

/**
 * A reference on a dlb_buffer: memory of the library, a wrapped
 * ArrayBuffer, shared memory, or an imported tensor. close() drops it; a
 * finalizer drops a handle never closed.
 */
export declare class DlbBuffer {
  private constructor();
  /** New zero-filled host memory, compact row-major: alloc('float32', [2, 3]). */
  static alloc(dtype: DType, shape: readonly number[]): DlbBuffer;
  /** New zero-filled memory another process can map (issueTicket). */
  static allocShared(dtype: DType, shape: readonly number[]): DlbBuffer;
  /**
   * The memory of an ArrayBuffer, TypedArray or DataView, without a copy.
   * The ArrayBuffer is kept alive until the library releases it (the last
   * handle and the last export gone) and is marked untransferable
   * (structuredClone and postMessage copy it from then on). Resizable
   * ArrayBuffers, growable SharedArrayBuffers and detached ArrayBuffers are
   * refused.
   */
  static wrap(memory: WrappableMemory, dtype: DType, shape: readonly number[]): DlbBuffer;
  /** Imports a tensor: on success the buffer owns it and `tensor` is spent. */
  static fromTensor(tensor: ManagedTensor): DlbBuffer;
  /**
   * Opens a ticket another process issued: the same memory, mapped here.
   * A ticket opens once. The open waits for the issuer (up to 20 s) off the
   * event loop; the promise rejects with a DlbError.
   */
  static openTicket(ticket: Uint8Array): Promise<DlbBuffer>;
  /** openTicket() on the calling thread: blocks the event loop while it waits. */
  static openTicketSync(ticket: Uint8Array): DlbBuffer;

  /** Extents, in elements. */
  readonly shape: number[];
  /** Strides, in elements. */
  readonly strides: number[];
  /** The element type's name. */
  readonly dtype: DType;
  /** Bytes of the elements. */
  readonly nbytes: number;
  /** The address of the first element. */
  readonly address: bigint;
  readonly readOnly: boolean;
  /** True once delete() was called. */
  readonly deleted: boolean;

  /**
   * An ArrayBuffer over the elements, without a copy, that holds the memory
   * alive until it is collected and cannot be transferred. Refused by the
   * library's host-view rule (dlb_buffer_host_view) for read-only memory,
   * strided tensors, device memory, a backend's storage, a deleted buffer.
   */
  arrayBuffer(): ArrayBuffer;
  /** arrayBuffer() as the TypedArray of the dtype; a TypeError for dtypes JavaScript has none for. */
  typedArray(): Int8Array | Uint8Array | Int16Array | Uint16Array | Int32Array | Uint32Array | BigInt64Array
    | BigUint64Array | Float32Array | Float64Array;
  /** A DLManagedTensorVersioned; readOnly sets its READ_ONLY flag. */
  exportVersioned(options?: { copy?: CopyPolicy; readOnly?: boolean }): ManagedTensor;
  /** A legacy DLManagedTensor (read-only memory: a copy, or refused with copy 'never'). */
  exportLegacy(options?: { copy?: CopyPolicy }): ManagedTensor;
  /** A ticket another process of this machine opens once (shared memory only, else DLB_ERR_NOT_ZERO_COPY). */
  issueTicket(): Buffer;
  /** Deletes (donates): later exports and views fail with DLB_ERR_DELETED; exports made before stay valid. */
  delete(): void;
  /** Drops this handle's reference; again: nothing. */
  close(): void;
  [Symbol.dispose](): void;
}

/** The library's version string. */
export declare const version: string;
/** Managed tensors the library exported whose deleter has not run (all environments). */
export declare function liveExports(): number;
/** JavaScript ArrayBuffers kept alive for the library (for leak checks). */
export declare function keptArrayBuffers(): number;
