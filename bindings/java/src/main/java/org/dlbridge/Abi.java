package org.dlbridge;

import java.util.LinkedHashMap;
import java.util.Map;

/**
 * Every number of the C headers the binding uses, in one place: constants,
 * struct sizes and field offsets (x86-64 and other LP64 targets). Both
 * implementations (JNA and FFM) read them from here, and the test suite
 * compiles a C program against the headers and compares each entry of
 * {@link #facts()} with what the compiler says (AbiTest).
 */
final class Abi {
  private Abi() {}

  // common.h
  static final int STATUS_COUNT = 15;

  // dlpack.h
  static final int DEVICE_CPU = 1; // kDLCPU
  static final int DLDEVICE_SIZE = 8;
  static final int DLDEVICE_DEVICE_ID = 4;
  static final int DLDATATYPE_SIZE = 4;
  static final int DLDATATYPE_BITS = 1;
  static final int DLDATATYPE_LANES = 2;
  static final int DLTENSOR_SIZE = 48;
  static final int DLTENSOR_DATA = 0;
  static final int DLTENSOR_DEVICE = 8;
  static final int DLTENSOR_NDIM = 16;
  static final int DLTENSOR_DTYPE = 20;
  static final int DLTENSOR_SHAPE = 24;
  static final int DLTENSOR_STRIDES = 32;
  static final int DLTENSOR_BYTE_OFFSET = 40;
  static final int VERSIONED_DL_TENSOR = 32; // offsetof(DLManagedTensorVersioned, dl_tensor)
  static final int LEGACY_DL_TENSOR = 0; // offsetof(DLManagedTensor, dl_tensor)
  static final int LEGACY_DELETER = 56; // offsetof(DLManagedTensor, deleter)
  static final int LEGACY_SIZE = 64; // sizeof(DLManagedTensor)

  // buffer.h
  static final long BUFFER_READ_ONLY = 1L;
  static final long BUFFER_DELETED = 1L << 8;
  static final int HOST_VIEW_READ = 0;
  static final int HOST_VIEW_WRITE = 1;
  static final int HOST_VIEW_SIZE = 40;
  static final int HOST_VIEW_DATA = 8;
  static final int HOST_VIEW_NBYTES = 16;
  static final int HOST_VIEW_NUMEL = 24;
  static final int HOST_VIEW_DTYPE = 32;
  static final int HOST_VIEW_WRITABLE = 36;
  static final int COPY_IF_NEEDED = 0;
  static final int COPY_NEVER = 1;
  static final int COPY_ALWAYS = 2;
  static final long EXPORT_READ_ONLY = 1L;
  static final int EXPORT_OPTIONS_SIZE = 40;
  static final int EXPORT_OPTIONS_COPY = 8;
  static final int EXPORT_OPTIONS_FLAGS = 32;

  // share.h
  static final int TICKET_MAX = 1272; // DLB_SHARE_TICKET_MAX
  static final int TICKET_SIZE = 1276; // sizeof(dlb_share_ticket)
  static final int TICKET_BYTES = 4; // offsetof(dlb_share_ticket, bytes)

  /**
   * The entries, by the name the C program prints for them (the C
   * expression it evaluates).
   */
  static Map<String, Long> facts() {
    Map<String, Long> f = new LinkedHashMap<>();
    f.put("DLB_STATUS_COUNT", (long) STATUS_COUNT);
    f.put("kDLCPU", (long) DEVICE_CPU);
    f.put("sizeof(DLDevice)", (long) DLDEVICE_SIZE);
    f.put("offsetof(DLDevice,device_id)", (long) DLDEVICE_DEVICE_ID);
    f.put("sizeof(DLDataType)", (long) DLDATATYPE_SIZE);
    f.put("offsetof(DLDataType,bits)", (long) DLDATATYPE_BITS);
    f.put("offsetof(DLDataType,lanes)", (long) DLDATATYPE_LANES);
    f.put("sizeof(DLTensor)", (long) DLTENSOR_SIZE);
    f.put("offsetof(DLTensor,data)", (long) DLTENSOR_DATA);
    f.put("offsetof(DLTensor,device)", (long) DLTENSOR_DEVICE);
    f.put("offsetof(DLTensor,ndim)", (long) DLTENSOR_NDIM);
    f.put("offsetof(DLTensor,dtype)", (long) DLTENSOR_DTYPE);
    f.put("offsetof(DLTensor,shape)", (long) DLTENSOR_SHAPE);
    f.put("offsetof(DLTensor,strides)", (long) DLTENSOR_STRIDES);
    f.put("offsetof(DLTensor,byte_offset)", (long) DLTENSOR_BYTE_OFFSET);
    f.put("offsetof(DLManagedTensorVersioned,dl_tensor)", (long) VERSIONED_DL_TENSOR);
    f.put("offsetof(DLManagedTensor,dl_tensor)", (long) LEGACY_DL_TENSOR);
    f.put("offsetof(DLManagedTensor,deleter)", (long) LEGACY_DELETER);
    f.put("sizeof(DLManagedTensor)", (long) LEGACY_SIZE);
    f.put("DLB_BUFFER_READ_ONLY", BUFFER_READ_ONLY);
    f.put("DLB_BUFFER_DELETED", BUFFER_DELETED);
    f.put("DLB_HOST_VIEW_READ", (long) HOST_VIEW_READ);
    f.put("DLB_HOST_VIEW_WRITE", (long) HOST_VIEW_WRITE);
    f.put("sizeof(dlb_host_view)", (long) HOST_VIEW_SIZE);
    f.put("offsetof(dlb_host_view,data)", (long) HOST_VIEW_DATA);
    f.put("offsetof(dlb_host_view,nbytes)", (long) HOST_VIEW_NBYTES);
    f.put("offsetof(dlb_host_view,numel)", (long) HOST_VIEW_NUMEL);
    f.put("offsetof(dlb_host_view,dtype)", (long) HOST_VIEW_DTYPE);
    f.put("offsetof(dlb_host_view,writable)", (long) HOST_VIEW_WRITABLE);
    f.put("DLB_COPY_IF_NEEDED", (long) COPY_IF_NEEDED);
    f.put("DLB_COPY_NEVER", (long) COPY_NEVER);
    f.put("DLB_COPY_ALWAYS", (long) COPY_ALWAYS);
    f.put("DLB_EXPORT_READ_ONLY", EXPORT_READ_ONLY);
    f.put("sizeof(dlb_export_options)", (long) EXPORT_OPTIONS_SIZE);
    f.put("offsetof(dlb_export_options,copy)", (long) EXPORT_OPTIONS_COPY);
    f.put("offsetof(dlb_export_options,flags)", (long) EXPORT_OPTIONS_FLAGS);
    f.put("DLB_SHARE_TICKET_MAX", (long) TICKET_MAX);
    f.put("sizeof(dlb_share_ticket)", (long) TICKET_SIZE);
    f.put("offsetof(dlb_share_ticket,bytes)", (long) TICKET_BYTES);
    return f;
  }
}
