//! Data types, devices and the element types Rust code reads and writes.

use std::ffi::{c_char, CStr, CString};

use crate::error::{check, Error, Result, Status};
use crate::ffi::{self, DLDataType, DLDevice};

impl DLDataType {
    pub const fn new(code: u8, bits: u8, lanes: u16) -> DLDataType {
        DLDataType { code, bits, lanes }
    }
    pub const I8: DLDataType = DLDataType::new(ffi::kDLInt, 8, 1);
    pub const I16: DLDataType = DLDataType::new(ffi::kDLInt, 16, 1);
    pub const I32: DLDataType = DLDataType::new(ffi::kDLInt, 32, 1);
    pub const I64: DLDataType = DLDataType::new(ffi::kDLInt, 64, 1);
    pub const U8: DLDataType = DLDataType::new(ffi::kDLUInt, 8, 1);
    pub const U16: DLDataType = DLDataType::new(ffi::kDLUInt, 16, 1);
    pub const U32: DLDataType = DLDataType::new(ffi::kDLUInt, 32, 1);
    pub const U64: DLDataType = DLDataType::new(ffi::kDLUInt, 64, 1);
    pub const F16: DLDataType = DLDataType::new(ffi::kDLFloat, 16, 1);
    pub const F32: DLDataType = DLDataType::new(ffi::kDLFloat, 32, 1);
    pub const F64: DLDataType = DLDataType::new(ffi::kDLFloat, 64, 1);
    pub const BF16: DLDataType = DLDataType::new(ffi::kDLBfloat, 16, 1);
    pub const BOOL: DLDataType = DLDataType::new(ffi::kDLBool, 8, 1);
    pub const COMPLEX64: DLDataType = DLDataType::new(ffi::kDLComplex, 64, 1);
    pub const COMPLEX128: DLDataType = DLDataType::new(ffi::kDLComplex, 128, 1);

    /// The dtype of a Rust element type.
    pub const fn of<T: Element>() -> DLDataType {
        T::DTYPE
    }

    /// `dlb_dtype_check`: Ok when DLPack defines this dtype.
    pub fn check(self) -> Result<()> {
        // SAFETY: plain value argument.
        check(unsafe { ffi::dlb_dtype_check(self) })
    }

    /// `dlb_dtype_name`: "float32", "uint8", "bfloat16", "float32x4", ...
    pub fn name(self) -> Result<String> {
        let mut out = [0 as c_char; 64];
        // SAFETY: `out` is writable for its whole length.
        check(unsafe { ffi::dlb_dtype_name(self, out.as_mut_ptr(), out.len()) })?;
        // SAFETY: written NUL-terminated on success.
        Ok(unsafe { CStr::from_ptr(out.as_ptr()) }.to_string_lossy().into_owned())
    }

    /// `dlb_dtype_from_name`: parses a name as `name()` writes it.
    pub fn from_name(name: &str) -> Result<DLDataType> {
        let c = CString::new(name)
            .map_err(|_| Error::new(Status::InvalidArgument, format!("dtype name {name:?} contains NUL")))?;
        let mut out = DLDataType::new(0, 0, 0);
        // SAFETY: valid C string and out pointer.
        check(unsafe { ffi::dlb_dtype_from_name(c.as_ptr(), &mut out) })?;
        Ok(out)
    }

    /// Bytes of one element, when it is a whole number of bytes.
    pub fn element_bytes(self) -> Option<usize> {
        let bits = self.bits as usize * self.lanes as usize;
        if bits & 7 == 0 {
            Some(bits / 8)
        } else {
            None
        }
    }
}

/// What the library's device table says about one device type
/// (`dlb_device_type_info`). The crate asks; it keeps no list of its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    /// The device type asked about.
    pub device_type: ffi::DLDeviceType,
    /// `DLB_DEVICE_*` bits.
    pub flags: u32,
    /// Lowercase name: "cpu", "cuda", "cuda_host", ...
    pub name: &'static str,
}

impl DeviceInfo {
    /// The table's entry for `device_type`; `Status::UnsupportedDevice` for
    /// a code DLPack does not define.
    pub fn of(device_type: ffi::DLDeviceType) -> Result<DeviceInfo> {
        let mut raw = ffi::dlb_device_info {
            struct_size: std::mem::size_of::<ffi::dlb_device_info>(),
            device_type: 0,
            flags: 0,
            name: std::ptr::null(),
        };
        // SAFETY: `raw` is writable and its struct_size is set.
        check(unsafe { ffi::dlb_device_type_info(device_type, &mut raw) })?;
        // SAFETY: on success `name` points at a static NUL-terminated string.
        let name = unsafe { CStr::from_ptr(raw.name) }.to_str().unwrap_or("?");
        Ok(DeviceInfo { device_type: raw.device_type, flags: raw.flags, name })
    }

    /// The device type the table names `name` ("cuda", "rocm_host", ...).
    pub fn named(name: &str) -> Result<DeviceInfo> {
        (0..=255)
            .filter_map(|code| DeviceInfo::of(code).ok())
            .find(|info| info.name == name)
            .ok_or_else(|| Error::new(Status::UnsupportedDevice, format!("no DLPack device type is named {name:?}")))
    }

    /// The CPU reads `data` directly.
    pub fn is_host_readable(&self) -> bool {
        self.flags & ffi::DLB_DEVICE_HOST_READABLE != 0
    }
    /// `data` is an address (byte_offset can be folded into it), not an
    /// opaque handle.
    pub fn data_is_address(&self) -> bool {
        self.flags & ffi::DLB_DEVICE_ADDRESS != 0
    }
    /// The Python protocol's `stream` applies.
    pub fn has_streams(&self) -> bool {
        self.flags & ffi::DLB_DEVICE_HAS_STREAMS != 0
    }
}

impl DLDevice {
    pub const fn new(device_type: ffi::DLDeviceType, device_id: i32) -> DLDevice {
        DLDevice { device_type, device_id }
    }
    /// The host: `{kDLCPU, 0}`.
    pub const CPU: DLDevice = DLDevice::new(ffi::kDLCPU, 0);

    /// The device of the type the library's table names `name`.
    pub fn named(name: &str, device_id: i32) -> Result<DLDevice> {
        Ok(DLDevice::new(DeviceInfo::named(name)?.device_type, device_id))
    }

    /// What the library's device table says about this device's type.
    pub fn info(self) -> Result<DeviceInfo> {
        DeviceInfo::of(self.device_type)
    }

    /// Whether the CPU can read this device's memory directly.
    pub fn is_host_accessible(self) -> bool {
        self.info().map(|i| i.is_host_readable()).unwrap_or(false)
    }
}

/// A Rust type whose values are the elements of one DLPack dtype.
///
/// # Safety
/// `size_of::<Self>()` must equal `DTYPE`'s bytes, and every bit pattern of
/// that size must be a valid `Self` (so memory written by any producer may be
/// read as `Self`).
pub unsafe trait Element: Copy + Send + Sync + 'static {
    /// The matching DLPack dtype (one lane).
    const DTYPE: DLDataType;
}

macro_rules! element {
    ($($t:ty => $d:ident),* $(,)?) => {
        $(
            // SAFETY: primitive integers and floats accept every bit pattern.
            unsafe impl Element for $t {
                const DTYPE: DLDataType = DLDataType::$d;
            }
        )*
    };
}

element!(i8 => I8, i16 => I16, i32 => I32, i64 => I64, u8 => U8, u16 => U16, u32 => U32, u64 => U64,
         f32 => F32, f64 => F64);
