package org.dlbridge;

/** What {@code dlb_buffer_host_view} says of a buffer's elements (copied out). */
final class HostView {
  long data;
  long nbytes;
  long numel;
  int dtype;
  boolean writable;
}
