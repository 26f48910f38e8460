//! Options of exports and imports.

use std::mem::{self, MaybeUninit};

use crate::ffi::{self, DLDevice};

/// Copy policy of an export (the Python protocol's `copy` argument).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum CopyPolicy {
    /// Zero-copy when possible, else a host copy.
    #[default]
    IfNeeded,
    /// Fail with `Status::NotZeroCopy` rather than copy.
    Never,
    /// Always a fresh compact host copy.
    Always,
}

/// Options of an export; `Default` is the library's defaults.
#[derive(Clone, Copy, Debug)]
pub struct ExportOptions {
    raw: ffi::dlb_export_options,
}

impl Default for ExportOptions {
    fn default() -> Self {
        ExportOptions::new()
    }
}

impl ExportOptions {
    pub fn new() -> ExportOptions {
        let mut raw = MaybeUninit::<ffi::dlb_export_options>::zeroed();
        // SAFETY: init fills the whole struct; zeroed is valid for it anyway.
        unsafe { ffi::dlb_export_options_init(raw.as_mut_ptr()) };
        // SAFETY: all-integer struct, initialised.
        let mut raw = unsafe { raw.assume_init() };
        raw.struct_size = mem::size_of::<ffi::dlb_export_options>();
        ExportOptions { raw }
    }
    pub fn copy(mut self, policy: CopyPolicy) -> Self {
        self.raw.copy = match policy {
            CopyPolicy::IfNeeded => ffi::DLB_COPY_IF_NEEDED,
            CopyPolicy::Never => ffi::DLB_COPY_NEVER,
            CopyPolicy::Always => ffi::DLB_COPY_ALWAYS,
        };
        self
    }
    pub fn target_device(mut self, device: DLDevice) -> Self {
        self.raw.has_target_device = 1;
        self.raw.target_device = device;
        self
    }
    pub fn stream(mut self, stream: i64) -> Self {
        self.raw.stream = stream;
        self
    }
    /// A stream the consumer passed explicitly (`DLB_EXPORT_STREAM_GIVEN`),
    /// so that 0 is a literal 0, which the library refuses for devices with
    /// streams, rather than "no stream".
    pub fn given_stream(self, stream: i64) -> Self {
        self.stream(stream).flag(ffi::DLB_EXPORT_STREAM_GIVEN, true)
    }
    fn flag(mut self, bit: u64, on: bool) -> Self {
        if on {
            self.raw.flags |= bit;
        } else {
            self.raw.flags &= !bit;
        }
        self
    }
    /// Mark the export READ_ONLY even for a writable buffer.
    pub fn read_only(self, on: bool) -> Self {
        self.flag(ffi::DLB_EXPORT_READ_ONLY, on)
    }
    /// Allow the legacy export of a read-only buffer.
    pub fn allow_read_only_legacy(self, on: bool) -> Self {
        self.flag(ffi::DLB_EXPORT_ALLOW_READ_ONLY_LEGACY, on)
    }
    pub fn as_raw(&self) -> &ffi::dlb_export_options {
        &self.raw
    }
}

/// Options of an import; `Default` requires nothing.
#[derive(Clone, Copy, Debug)]
pub struct ImportOptions {
    raw: ffi::dlb_import_options,
}

impl Default for ImportOptions {
    fn default() -> Self {
        ImportOptions::new()
    }
}

impl ImportOptions {
    pub fn new() -> ImportOptions {
        let mut raw = MaybeUninit::<ffi::dlb_import_options>::zeroed();
        // SAFETY: as in ExportOptions::new.
        unsafe { ffi::dlb_import_options_init(raw.as_mut_ptr()) };
        // SAFETY: all-integer struct, initialised.
        let mut raw = unsafe { raw.assume_init() };
        raw.struct_size = mem::size_of::<ffi::dlb_import_options>();
        ImportOptions { raw }
    }
    /// Required alignment in bytes of the first element (a power of two).
    pub fn require_alignment(mut self, bytes: u64) -> Self {
        self.raw.require_alignment = bytes;
        self
    }
    pub fn require_contiguous(mut self, on: bool) -> Self {
        self.raw.require_contiguous = on as i32;
        self
    }
    pub fn require_writable(mut self, on: bool) -> Self {
        self.raw.require_writable = on as i32;
        self
    }
    /// Treat a legacy tensor as read-only.
    pub fn legacy_read_only(mut self, on: bool) -> Self {
        if on {
            self.raw.flags |= ffi::DLB_IMPORT_LEGACY_READ_ONLY;
        } else {
            self.raw.flags &= !ffi::DLB_IMPORT_LEGACY_READ_ONLY;
        }
        self
    }
    pub fn as_raw(&self) -> &ffi::dlb_import_options {
        &self.raw
    }
}
