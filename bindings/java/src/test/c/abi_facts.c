/* Prints, one per line, "EXPRESSION VALUE" for every number of the C
 * headers the Java binding uses (its Abi class), as this compiler lays the
 * structs out: AbiTest compiles and runs it and compares each line with
 * Abi.facts(). */
#include <dlbridge/dlbridge.h>
#include <stddef.h>
#include <stdio.h>

#define FACT(e) printf("%s %lld\n", #e, (long long)(e))
#define SIZE(t) printf("sizeof(%s) %lld\n", #t, (long long)sizeof(t))
#define OFFSET(t, f) printf("offsetof(%s,%s) %lld\n", #t, #f, (long long)offsetof(t, f))

int main(void) {
  FACT(DLB_STATUS_COUNT);
  FACT(kDLCPU);
  SIZE(DLDevice);
  OFFSET(DLDevice, device_id);
  SIZE(DLDataType);
  OFFSET(DLDataType, bits);
  OFFSET(DLDataType, lanes);
  SIZE(DLTensor);
  OFFSET(DLTensor, data);
  OFFSET(DLTensor, device);
  OFFSET(DLTensor, ndim);
  OFFSET(DLTensor, dtype);
  OFFSET(DLTensor, shape);
  OFFSET(DLTensor, strides);
  OFFSET(DLTensor, byte_offset);
  OFFSET(DLManagedTensorVersioned, dl_tensor);
  OFFSET(DLManagedTensor, dl_tensor);
  OFFSET(DLManagedTensor, deleter);
  SIZE(DLManagedTensor);
  FACT(DLB_BUFFER_READ_ONLY);
  FACT(DLB_BUFFER_DELETED);
  FACT(DLB_HOST_VIEW_READ);
  FACT(DLB_HOST_VIEW_WRITE);
  SIZE(dlb_host_view);
  OFFSET(dlb_host_view, data);
  OFFSET(dlb_host_view, nbytes);
  OFFSET(dlb_host_view, numel);
  OFFSET(dlb_host_view, dtype);
  OFFSET(dlb_host_view, writable);
  FACT(DLB_COPY_IF_NEEDED);
  FACT(DLB_COPY_NEVER);
  FACT(DLB_COPY_ALWAYS);
  FACT(DLB_EXPORT_READ_ONLY);
  SIZE(dlb_export_options);
  OFFSET(dlb_export_options, copy);
  OFFSET(dlb_export_options, flags);
  FACT(DLB_SHARE_TICKET_MAX);
  SIZE(dlb_share_ticket);
  OFFSET(dlb_share_ticket, bytes);
  return 0;
}
