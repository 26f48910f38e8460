//! The hand-written declarations of `dlbridge-sys` match the C header:
//! struct sizes, field offsets, constants, and the list of exported
//! functions. The test compiles and runs a small C program itself (with the
//! `cc` on PATH, or `$CC`), and says it skipped when there is none.

use std::collections::BTreeMap;
use std::mem::{align_of, offset_of, size_of};
use std::path::PathBuf;
use std::process::Command;

use dlbridge::ffi::*;

const LAYOUT_PROGRAM: &str = r#"
#include <stddef.h>
#include <stdio.h>
#include <dlbridge/dlbridge.h>

#define SIZE(T) \
  printf("layout size_of %s %zu\n", #T, sizeof(T)); \
  printf("layout align_of %s %zu\n", #T, (size_t)_Alignof(T))
#define OFF(T, f) printf("layout offset_of %s.%s %zu\n", #T, #f, offsetof(T, f))
#define CONST(c) printf("const %s %lld\n", #c, (long long)(c))

int main(void) {
  SIZE(DLDevice); OFF(DLDevice, device_type); OFF(DLDevice, device_id);
  SIZE(DLDataType); OFF(DLDataType, code); OFF(DLDataType, bits); OFF(DLDataType, lanes);
  SIZE(DLTensor); OFF(DLTensor, data); OFF(DLTensor, device); OFF(DLTensor, ndim);
  OFF(DLTensor, dtype); OFF(DLTensor, shape); OFF(DLTensor, strides); OFF(DLTensor, byte_offset);
  SIZE(DLManagedTensor); OFF(DLManagedTensor, dl_tensor); OFF(DLManagedTensor, manager_ctx);
  OFF(DLManagedTensor, deleter);
  SIZE(DLPackVersion); OFF(DLPackVersion, major); OFF(DLPackVersion, minor);
  SIZE(DLManagedTensorVersioned); OFF(DLManagedTensorVersioned, version);
  OFF(DLManagedTensorVersioned, manager_ctx); OFF(DLManagedTensorVersioned, deleter);
  OFF(DLManagedTensorVersioned, flags); OFF(DLManagedTensorVersioned, dl_tensor);
  SIZE(dlb_export_options); OFF(dlb_export_options, struct_size); OFF(dlb_export_options, copy);
  OFF(dlb_export_options, has_target_device); OFF(dlb_export_options, target_device);
  OFF(dlb_export_options, stream); OFF(dlb_export_options, flags);
  SIZE(dlb_import_options); OFF(dlb_import_options, struct_size);
  OFF(dlb_import_options, require_alignment); OFF(dlb_import_options, require_contiguous);
  OFF(dlb_import_options, require_writable); OFF(dlb_import_options, flags);
  SIZE(dlb_backend_vtable); OFF(dlb_backend_vtable, struct_size); OFF(dlb_backend_vtable, name);
  OFF(dlb_backend_vtable, acquire_access); OFF(dlb_backend_vtable, release_access);
  OFF(dlb_backend_vtable, copy_to_host); OFF(dlb_backend_vtable, wait_ready);
  OFF(dlb_backend_vtable, free_storage); OFF(dlb_backend_vtable, query_layout);
  OFF(dlb_backend_vtable, destroy);
  SIZE(dlb_device_info); OFF(dlb_device_info, struct_size); OFF(dlb_device_info, device_type);
  OFF(dlb_device_info, flags); OFF(dlb_device_info, name);
  SIZE(dlb_layout_info); OFF(dlb_layout_info, struct_size); OFF(dlb_layout_info, numel);
  OFF(dlb_layout_info, nbytes); OFF(dlb_layout_info, element_bits); OFF(dlb_layout_info, contiguous);
  OFF(dlb_layout_info, min_offset); OFF(dlb_layout_info, max_offset);
  SIZE(dlb_status); SIZE(dlb_copy_policy); SIZE(DLDeviceType);
  SIZE(dlb_share_descriptor); OFF(dlb_share_descriptor, fd); OFF(dlb_share_descriptor, size);
  OFF(dlb_share_descriptor, description);
  SIZE(dlb_share_ticket); OFF(dlb_share_ticket, size); OFF(dlb_share_ticket, bytes);
  CONST(DLB_OK); CONST(DLB_ERR_INVALID_ARGUMENT); CONST(DLB_ERR_OUT_OF_MEMORY);
  CONST(DLB_ERR_DELETED); CONST(DLB_ERR_NOT_ZERO_COPY); CONST(DLB_ERR_UNSUPPORTED_DTYPE);
  CONST(DLB_ERR_UNSUPPORTED_DEVICE); CONST(DLB_ERR_UNSUPPORTED_LAYOUT); CONST(DLB_ERR_READ_ONLY);
  CONST(DLB_ERR_VERSION); CONST(DLB_ERR_OVERFLOW); CONST(DLB_ERR_MALFORMED);
  CONST(DLB_ERR_ALIGNMENT); CONST(DLB_ERR_BACKEND); CONST(DLB_ERR_INTERNAL);
  CONST(DLB_STATUS_COUNT); CONST(DLB_MAX_NDIM);
  CONST(DLB_VERSION_MAJOR); CONST(DLB_VERSION_MINOR); CONST(DLB_VERSION_PATCH);
  CONST(DLB_DLPACK_MAJOR); CONST(DLB_DLPACK_MINOR);
  CONST(DLB_BUFFER_READ_ONLY); CONST(DLB_BUFFER_IMMUTABLE); CONST(DLB_BUFFER_DELETED);
  CONST(DLB_BUFFER_COPIED); CONST(DLB_BUFFER_IMPORTED); CONST(DLB_BUFFER_BACKEND);
  CONST(DLB_COPY_IF_NEEDED); CONST(DLB_COPY_NEVER); CONST(DLB_COPY_ALWAYS);
  CONST(DLB_EXPORT_READ_ONLY); CONST(DLB_EXPORT_ALLOW_READ_ONLY_LEGACY); CONST(DLB_EXPORT_STREAM_GIVEN);
  CONST(DLB_STREAM_NONE);
  CONST(DLB_DEVICE_KNOWN); CONST(DLB_DEVICE_HOST_READABLE); CONST(DLB_DEVICE_ADDRESS);
  CONST(DLB_DEVICE_HAS_STREAMS); CONST(DLB_DEVICE_CUDA_BACKEND);
  CONST(DLB_IMPORT_LEGACY_READ_ONLY); CONST(DLB_IMPORT_CUDA_BACKEND); CONST(DLB_IMPORT_DEVICE_BACKEND);
  CONST(DLB_VALIDATE_CONTIGUOUS); CONST(DLB_VALIDATE_STRIDES_REQUIRED);
  CONST(DLB_COPY_FLAG_SWAP_BYTES); CONST(DLB_COPY_FLAG_SUBBYTE_PADDED); CONST(DLB_COPY_FLAG_BYTE_STRIDES);
  CONST(DLB_LAYOUT_STRIDED); CONST(DLB_LAYOUT_TILED); CONST(DLB_LAYOUT_MULTI_PART);
  CONST(DLB_LAYOUT_DYNAMIC);
  CONST(DLPACK_FLAG_BITMASK_READ_ONLY); CONST(DLPACK_FLAG_BITMASK_IS_COPIED);
  CONST(DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED);
  CONST(DLB_SHARE_DESCRIPTION_MAX); CONST(DLB_SHARE_TICKET_MAX); CONST(DLB_SHARE_VIA_SERVER);
  CONST(kDLCPU);
  CONST(kDLInt); CONST(kDLUInt); CONST(kDLFloat); CONST(kDLOpaqueHandle); CONST(kDLBfloat);
  CONST(kDLComplex); CONST(kDLBool);
  return 0;
}
"#;

fn include_dir() -> PathBuf {
    match std::env::var("DLBRIDGE_INCLUDE_DIR") {
        Ok(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../include"),
    }
}

/// What the C compiler says: ("layout ...", value) and ("const ...", value)
/// lines of the program's output; None (after saying so) without a compiler.
fn c_facts() -> Option<(BTreeMap<String, usize>, BTreeMap<String, i64>)> {
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let dir = std::env::temp_dir().join(
        format!("dlbridge-layout-{}-{:?}", std::process::id(), std::thread::current().id()).replace(['(', ')'], ""),
    );
    std::fs::create_dir_all(&dir).expect("temporary directory");
    let src = dir.join("layout.c");
    let exe = dir.join("layout");
    std::fs::write(&src, LAYOUT_PROGRAM).expect("write layout.c");
    let status =
        match Command::new(&cc).arg("-std=c11").arg("-I").arg(include_dir()).arg(&src).arg("-o").arg(&exe).status() {
            Ok(s) => s,
            Err(e) => {
                eprintln!("skipped: no C compiler ({cc}: {e}); set CC or put cc on PATH");
                return None;
            }
        };
    assert!(status.success(), "{cc} failed to compile {} ({status})", src.display());
    let out = Command::new(&exe).output().expect("run the layout program");
    assert!(out.status.success(), "the layout program failed");
    let _ = std::fs::remove_dir_all(&dir);
    let mut layout = BTreeMap::new();
    let mut constants = BTreeMap::new();
    for line in String::from_utf8(out.stdout).unwrap().lines() {
        let (key, value) = line.rsplit_once(' ').unwrap();
        if let Some(k) = key.strip_prefix("layout ") {
            layout.insert(k.to_string(), value.parse().unwrap());
        } else if let Some(k) = key.strip_prefix("const ") {
            constants.insert(k.to_string(), value.parse().unwrap());
        }
    }
    Some((layout, constants))
}

macro_rules! layout {
    ($m:ident; $t:ident { $($f:ident),* }) => {
        $m.insert(format!("size_of {}", stringify!($t)), size_of::<$t>());
        $m.insert(format!("align_of {}", stringify!($t)), align_of::<$t>());
        $( $m.insert(format!("offset_of {}.{}", stringify!($t), stringify!($f)), offset_of!($t, $f)); )*
    };
}

fn rust_layout() -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    layout!(m; DLDevice { device_type, device_id });
    layout!(m; DLDataType { code, bits, lanes });
    layout!(m; DLTensor { data, device, ndim, dtype, shape, strides, byte_offset });
    layout!(m; DLManagedTensor { dl_tensor, manager_ctx, deleter });
    layout!(m; DLPackVersion { major, minor });
    layout!(m; DLManagedTensorVersioned { version, manager_ctx, deleter, flags, dl_tensor });
    layout!(m; dlb_export_options { struct_size, copy, has_target_device, target_device, stream, flags });
    layout!(m; dlb_import_options { struct_size, require_alignment, require_contiguous, require_writable, flags });
    layout!(m; dlb_backend_vtable { struct_size, name, acquire_access, release_access, copy_to_host,
                                    wait_ready, free_storage, query_layout, destroy });
    layout!(m; dlb_device_info { struct_size, device_type, flags, name });
    layout!(m; dlb_layout_info { struct_size, numel, nbytes, element_bits, contiguous, min_offset, max_offset });
    layout!(m; dlb_status {});
    layout!(m; dlb_copy_policy {});
    layout!(m; DLDeviceType {});
    layout!(m; dlb_share_descriptor { fd, size, description });
    layout!(m; dlb_share_ticket { size, bytes });
    m
}

#[test]
fn struct_layouts_match_the_c_header() {
    let Some((c_map, _)) = c_facts() else { return };
    let rust = rust_layout();
    assert!(c_map.len() >= 50, "too few C measurements: {}", c_map.len());
    let mut mismatches = Vec::new();
    for (key, c_value) in &c_map {
        match rust.get(key) {
            Some(r) if r == c_value => {}
            Some(r) => mismatches.push(format!("{key}: C {c_value}, Rust {r}")),
            None => mismatches.push(format!("{key}: not measured on the Rust side")),
        }
    }
    for key in rust.keys() {
        if !c_map.contains_key(key) {
            mismatches.push(format!("{key}: not measured on the C side"));
        }
    }
    assert!(mismatches.is_empty(), "layout mismatches:\n{}", mismatches.join("\n"));
    // The documented x86-64 facts, independently of the C compiler.
    if cfg!(target_pointer_width = "64") {
        assert_eq!(size_of::<DLTensor>(), 48);
        assert_eq!(size_of::<DLManagedTensor>(), 64);
        assert_eq!(size_of::<DLManagedTensorVersioned>(), 80);
        assert_eq!(offset_of!(DLManagedTensorVersioned, flags), 24);
        assert_eq!(offset_of!(DLManagedTensorVersioned, dl_tensor), 32);
    }
}

#[test]
fn constants_match_the_c_header() {
    let Some((_, c_constants)) = c_facts() else { return };
    let rust: BTreeMap<&str, i64> = [
        ("DLB_OK", DLB_OK as i64),
        ("DLB_ERR_INVALID_ARGUMENT", DLB_ERR_INVALID_ARGUMENT as i64),
        ("DLB_ERR_OUT_OF_MEMORY", DLB_ERR_OUT_OF_MEMORY as i64),
        ("DLB_ERR_DELETED", DLB_ERR_DELETED as i64),
        ("DLB_ERR_NOT_ZERO_COPY", DLB_ERR_NOT_ZERO_COPY as i64),
        ("DLB_ERR_UNSUPPORTED_DTYPE", DLB_ERR_UNSUPPORTED_DTYPE as i64),
        ("DLB_ERR_UNSUPPORTED_DEVICE", DLB_ERR_UNSUPPORTED_DEVICE as i64),
        ("DLB_ERR_UNSUPPORTED_LAYOUT", DLB_ERR_UNSUPPORTED_LAYOUT as i64),
        ("DLB_ERR_READ_ONLY", DLB_ERR_READ_ONLY as i64),
        ("DLB_ERR_VERSION", DLB_ERR_VERSION as i64),
        ("DLB_ERR_OVERFLOW", DLB_ERR_OVERFLOW as i64),
        ("DLB_ERR_MALFORMED", DLB_ERR_MALFORMED as i64),
        ("DLB_ERR_ALIGNMENT", DLB_ERR_ALIGNMENT as i64),
        ("DLB_ERR_BACKEND", DLB_ERR_BACKEND as i64),
        ("DLB_ERR_INTERNAL", DLB_ERR_INTERNAL as i64),
        ("DLB_STATUS_COUNT", DLB_STATUS_COUNT as i64),
        ("DLB_MAX_NDIM", DLB_MAX_NDIM as i64),
        ("DLB_VERSION_MAJOR", DLB_VERSION_MAJOR as i64),
        ("DLB_VERSION_MINOR", DLB_VERSION_MINOR as i64),
        ("DLB_VERSION_PATCH", DLB_VERSION_PATCH as i64),
        ("DLB_DLPACK_MAJOR", DLB_DLPACK_MAJOR as i64),
        ("DLB_DLPACK_MINOR", DLB_DLPACK_MINOR as i64),
        ("DLB_BUFFER_READ_ONLY", DLB_BUFFER_READ_ONLY as i64),
        ("DLB_BUFFER_IMMUTABLE", DLB_BUFFER_IMMUTABLE as i64),
        ("DLB_BUFFER_DELETED", DLB_BUFFER_DELETED as i64),
        ("DLB_BUFFER_COPIED", DLB_BUFFER_COPIED as i64),
        ("DLB_BUFFER_IMPORTED", DLB_BUFFER_IMPORTED as i64),
        ("DLB_BUFFER_BACKEND", DLB_BUFFER_BACKEND as i64),
        ("DLB_COPY_IF_NEEDED", DLB_COPY_IF_NEEDED as i64),
        ("DLB_COPY_NEVER", DLB_COPY_NEVER as i64),
        ("DLB_COPY_ALWAYS", DLB_COPY_ALWAYS as i64),
        ("DLB_EXPORT_READ_ONLY", DLB_EXPORT_READ_ONLY as i64),
        ("DLB_EXPORT_ALLOW_READ_ONLY_LEGACY", DLB_EXPORT_ALLOW_READ_ONLY_LEGACY as i64),
        ("DLB_EXPORT_STREAM_GIVEN", DLB_EXPORT_STREAM_GIVEN as i64),
        ("DLB_STREAM_NONE", DLB_STREAM_NONE),
        ("DLB_DEVICE_KNOWN", DLB_DEVICE_KNOWN as i64),
        ("DLB_DEVICE_HOST_READABLE", DLB_DEVICE_HOST_READABLE as i64),
        ("DLB_DEVICE_ADDRESS", DLB_DEVICE_ADDRESS as i64),
        ("DLB_DEVICE_HAS_STREAMS", DLB_DEVICE_HAS_STREAMS as i64),
        ("DLB_DEVICE_CUDA_BACKEND", DLB_DEVICE_CUDA_BACKEND as i64),
        ("DLB_IMPORT_LEGACY_READ_ONLY", DLB_IMPORT_LEGACY_READ_ONLY as i64),
        ("DLB_IMPORT_CUDA_BACKEND", DLB_IMPORT_CUDA_BACKEND as i64),
        ("DLB_IMPORT_DEVICE_BACKEND", DLB_IMPORT_DEVICE_BACKEND as i64),
        ("DLB_VALIDATE_CONTIGUOUS", DLB_VALIDATE_CONTIGUOUS as i64),
        ("DLB_VALIDATE_STRIDES_REQUIRED", DLB_VALIDATE_STRIDES_REQUIRED as i64),
        ("DLB_COPY_FLAG_SWAP_BYTES", DLB_COPY_FLAG_SWAP_BYTES as i64),
        ("DLB_COPY_FLAG_SUBBYTE_PADDED", DLB_COPY_FLAG_SUBBYTE_PADDED as i64),
        ("DLB_COPY_FLAG_BYTE_STRIDES", DLB_COPY_FLAG_BYTE_STRIDES as i64),
        ("DLB_LAYOUT_STRIDED", DLB_LAYOUT_STRIDED as i64),
        ("DLB_LAYOUT_TILED", DLB_LAYOUT_TILED as i64),
        ("DLB_LAYOUT_MULTI_PART", DLB_LAYOUT_MULTI_PART as i64),
        ("DLB_LAYOUT_DYNAMIC", DLB_LAYOUT_DYNAMIC as i64),
        ("DLPACK_FLAG_BITMASK_READ_ONLY", DLPACK_FLAG_BITMASK_READ_ONLY as i64),
        ("DLPACK_FLAG_BITMASK_IS_COPIED", DLPACK_FLAG_BITMASK_IS_COPIED as i64),
        ("DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED", DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED as i64),
        ("DLB_SHARE_DESCRIPTION_MAX", DLB_SHARE_DESCRIPTION_MAX as i64),
        ("DLB_SHARE_TICKET_MAX", DLB_SHARE_TICKET_MAX as i64),
        ("DLB_SHARE_VIA_SERVER", DLB_SHARE_VIA_SERVER as i64),
        ("kDLCPU", kDLCPU as i64),
        ("kDLInt", kDLInt as i64),
        ("kDLUInt", kDLUInt as i64),
        ("kDLFloat", kDLFloat as i64),
        ("kDLOpaqueHandle", kDLOpaqueHandle as i64),
        ("kDLBfloat", kDLBfloat as i64),
        ("kDLComplex", kDLComplex as i64),
        ("kDLBool", kDLBool as i64),
    ]
    .into_iter()
    .collect();
    let mut mismatches = Vec::new();
    for (name, c_value) in &c_constants {
        match rust.get(name.as_str()) {
            Some(r) if r == c_value => {}
            Some(r) => mismatches.push(format!("{name}: C {c_value}, Rust {r}")),
            None => mismatches.push(format!("{name}: no Rust constant")),
        }
    }
    assert_eq!(c_constants.len(), rust.len(), "the two constant tables differ in length");
    assert!(mismatches.is_empty(), "constant mismatches:\n{}", mismatches.join("\n"));
}

/// Every `dlb_` function of the header except the Python-only ones is
/// declared in `ffi` (the table below only compiles if it is).
#[test]
fn every_header_function_is_declared() {
    let declared: &[(&str, *const ())] = &[
        ("dlb_version_string", dlb_version_string as *const ()),
        ("dlb_version_number", dlb_version_number as *const ()),
        ("dlb_dlpack_version", dlb_dlpack_version as *const ()),
        ("dlb_status_name", dlb_status_name as *const ()),
        ("dlb_last_error_message", dlb_last_error_message as *const ()),
        ("dlb_last_error_code", dlb_last_error_code as *const ()),
        ("dlb_clear_last_error", dlb_clear_last_error as *const ()),
        ("dlb_dtype_check", dlb_dtype_check as *const ()),
        ("dlb_dtype_name", dlb_dtype_name as *const ()),
        ("dlb_dtype_from_name", dlb_dtype_from_name as *const ()),
        ("dlb_buffer_alloc", dlb_buffer_alloc as *const ()),
        ("dlb_buffer_wrap", dlb_buffer_wrap as *const ()),
        ("dlb_buffer_retain", dlb_buffer_retain as *const ()),
        ("dlb_buffer_release", dlb_buffer_release as *const ()),
        ("dlb_buffer_delete", dlb_buffer_delete as *const ()),
        ("dlb_buffer_dltensor", dlb_buffer_dltensor as *const ()),
        ("dlb_buffer_flags", dlb_buffer_flags as *const ()),
        ("dlb_buffer_nbytes", dlb_buffer_nbytes as *const ()),
        ("dlb_buffer_refcount", dlb_buffer_refcount as *const ()),
        ("dlb_buffer_to_host", dlb_buffer_to_host as *const ()),
        ("dlb_export_options_init", dlb_export_options_init as *const ()),
        ("dlb_export_versioned", dlb_export_versioned as *const ()),
        ("dlb_export_legacy", dlb_export_legacy as *const ()),
        ("dlb_live_exports", dlb_live_exports as *const ()),
        ("dlb_import_options_init", dlb_import_options_init as *const ()),
        ("dlb_import_versioned", dlb_import_versioned as *const ()),
        ("dlb_import_legacy", dlb_import_legacy as *const ()),
        ("dlb_managed_free_versioned", dlb_managed_free_versioned as *const ()),
        ("dlb_managed_free_legacy", dlb_managed_free_legacy as *const ()),
        ("dlb_validate", dlb_validate as *const ()),
        ("dlb_copy_to_contiguous", dlb_copy_to_contiguous as *const ()),
        ("dlb_backend_create", dlb_backend_create as *const ()),
        ("dlb_backend_retain", dlb_backend_retain as *const ()),
        ("dlb_backend_release", dlb_backend_release as *const ()),
        ("dlb_buffer_from_backend", dlb_buffer_from_backend as *const ()),
        ("dlb_backend_set_error", dlb_backend_set_error as *const ()),
        ("dlb_device_type_info", dlb_device_type_info as *const ()),
        ("dlb_compact_strides", dlb_compact_strides as *const ()),
        ("dlb_buffer_resolve", dlb_buffer_resolve as *const ()),
        ("dlb_check_consumer_stream", dlb_check_consumer_stream as *const ()),
        ("dlb_layout_describe", dlb_layout_describe as *const ()),
        ("dlb_import_versioned_on_stream", dlb_import_versioned_on_stream as *const ()),
        ("dlb_import_legacy_on_stream", dlb_import_legacy_on_stream as *const ()),
        #[cfg(feature = "cuda")]
        ("dlb_cuda_backend_create", dlb_cuda_backend_create as *const ()),
        #[cfg(feature = "cuda")]
        ("dlb_cuda_buffer_alloc", dlb_cuda_buffer_alloc as *const ()),
        #[cfg(feature = "cuda")]
        ("dlb_cuda_buffer_wrap", dlb_cuda_buffer_wrap as *const ()),
        #[cfg(feature = "cuda")]
        ("dlb_cuda_import_versioned", dlb_cuda_import_versioned as *const ()),
        #[cfg(feature = "cuda")]
        ("dlb_cuda_import_legacy", dlb_cuda_import_legacy as *const ()),
        #[cfg(feature = "cuda")]
        ("dlb_cuda_buffer_set_stream", dlb_cuda_buffer_set_stream as *const ()),
        #[cfg(feature = "cuda")]
        ("dlb_cuda_buffer_stream", dlb_cuda_buffer_stream as *const ()),
        #[cfg(feature = "opencl")]
        ("dlb_opencl_device_count", dlb_opencl_device_count as *const ()),
        #[cfg(feature = "opencl")]
        ("dlb_opencl_device_index", dlb_opencl_device_index as *const ()),
        #[cfg(feature = "opencl")]
        ("dlb_opencl_queue_device_index", dlb_opencl_queue_device_index as *const ()),
        #[cfg(feature = "opencl")]
        ("dlb_opencl_backend_create", dlb_opencl_backend_create as *const ()),
        #[cfg(feature = "opencl")]
        ("dlb_opencl_backend_from_queue", dlb_opencl_backend_from_queue as *const ()),
        #[cfg(feature = "opencl")]
        ("dlb_opencl_backend_queue", dlb_opencl_backend_queue as *const ()),
        #[cfg(feature = "opencl")]
        ("dlb_opencl_buffer_alloc", dlb_opencl_buffer_alloc as *const ()),
        #[cfg(feature = "opencl")]
        ("dlb_opencl_buffer_wrap", dlb_opencl_buffer_wrap as *const ()),
        #[cfg(feature = "opencl")]
        ("dlb_opencl_import_versioned", dlb_opencl_import_versioned as *const ()),
        #[cfg(feature = "opencl")]
        ("dlb_opencl_import_legacy", dlb_opencl_import_legacy as *const ()),
        #[cfg(feature = "opencl")]
        ("dlb_opencl_buffer_set_event", dlb_opencl_buffer_set_event as *const ()),
        ("dlb_set_copy_threads", dlb_set_copy_threads as *const ()),
        ("dlb_copy_threads", dlb_copy_threads as *const ()),
        ("dlb_managed_tensor_alloc", dlb_managed_tensor_alloc as *const ()),
        ("dlb_buffer_alloc_shared", dlb_buffer_alloc_shared as *const ()),
        ("dlb_buffer_copy_shared", dlb_buffer_copy_shared as *const ()),
        ("dlb_buffer_share", dlb_buffer_share as *const ()),
        ("dlb_buffer_open_shared", dlb_buffer_open_shared as *const ()),
        ("dlb_share_description_kind", dlb_share_description_kind as *const ()),
        ("dlb_share_descriptor_close", dlb_share_descriptor_close as *const ()),
        ("dlb_share_send", dlb_share_send as *const ()),
        ("dlb_share_recv", dlb_share_recv as *const ()),
        ("dlb_shared_mappings", dlb_shared_mappings as *const ()),
        ("dlb_share_ticket_issue", dlb_share_ticket_issue as *const ()),
        ("dlb_share_ticket_open", dlb_share_ticket_open as *const ()),
        ("dlb_share_ticket_server", dlb_share_ticket_server as *const ()),
        ("dlb_share_ticket_withdraw", dlb_share_ticket_withdraw as *const ()),
        ("dlb_share_ticket_wait", dlb_share_ticket_wait as *const ()),
        ("dlb_buffer_is_shared", dlb_buffer_is_shared as *const ()),
        ("dlb_copy_to_contiguous_flags", dlb_copy_to_contiguous_flags as *const ()),
        ("dlb_layout_describe_flags", dlb_layout_describe_flags as *const ()),
        ("dlb_buffer_host_view", dlb_buffer_host_view as *const ()),
    ];
    assert!(declared.iter().all(|(_, p)| !p.is_null()));
    let names = header_functions();
    let header: Vec<&str> = names.iter().map(String::as_str).collect();
    assert!(header.len() >= 30, "header parse found only {} functions", header.len());
    // Without the `cuda` (`opencl`) feature the CUDA (OpenCL) entry points
    // are left out of ffi.
    let missing: Vec<&&str> = header
        .iter()
        .filter(|n| cfg!(feature = "cuda") || !n.starts_with("dlb_cuda_"))
        .filter(|n| cfg!(feature = "opencl") || !n.starts_with("dlb_opencl_"))
        .filter(|n| !declared.iter().any(|(d, _)| d == *n))
        .collect();
    let extra: Vec<&str> = declared.iter().map(|(d, _)| *d).filter(|d| !header.contains(d)).collect();
    assert!(missing.is_empty(), "declared in the header, missing in ffi: {missing:?}");
    assert!(extra.is_empty(), "declared in ffi, not in the header: {extra:?}");
}

/// The names of the functions the headers declare (every `DLB_API`
/// declaration in include/dlbridge/*.h).
fn header_functions() -> Vec<String> {
    let mut names = Vec::new();
    let dir = include_dir().join("dlbridge");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "h"))
        .collect();
    files.sort();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        for (i, _) in text.match_indices("DLB_API ") {
            let rest = &text[i + "DLB_API ".len()..];
            let Some(paren) = rest.find('(') else { continue };
            let decl = rest[..paren].trim_end();
            let start = decl.rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).map_or(0, |p| p + 1);
            let name = &decl[start..];
            if name.starts_with("dlb_") && !names.iter().any(|n| n == name) {
                names.push(name.to_string());
            }
        }
    }
    names
}
