package org.dlbridge;

/** What {@code dlb_buffer_dltensor} says of a buffer (copied out). */
final class TensorInfo {
  long data;
  long byteOffset;
  int deviceType;
  int deviceId;
  /** DLDataType as its 4 bytes read little-endian: code | bits << 8 | lanes << 16. */
  int dtype;
  long[] shape;
  long[] strides;
}
