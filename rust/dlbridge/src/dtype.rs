//! Data types, devices and the element types Rust code reads and writes.

use std::ffi::{c_char, CStr, CString};

use crate::error::{check, Error, Result, Status};
use crate::ffi::{self, DLDataType, DLDevice};
use crate::flags::DeviceFlags;

/// What the library says about a dtype (`DLDataType` is declared in
/// `dlbridge-sys`, with its constructors and the common dtypes as consts).
pub trait DataTypeExt: Sized {
    /// The dtype of a Rust element type.
    fn of<T: Element>() -> DLDataType {
        T::DTYPE
    }
    /// `dlb_dtype_check`: Ok when DLPack defines this dtype.
    fn check(self) -> Result<()>;
    /// `dlb_dtype_name`: "float32", "uint8", "bfloat16", "float32x4", ...
    fn name(self) -> Result<String>;
    /// `dlb_dtype_from_name`: parses a name as `name()` writes it.
    fn from_name(name: &str) -> Result<DLDataType>;
    /// Bytes of one element, when it is a whole number of bytes, as the
    /// library counts them (`dlb_layout_describe`); None for sub-byte types
    /// and for dtypes the library does not know.
    fn element_bytes(self) -> Option<usize>;
}

impl DataTypeExt for DLDataType {
    fn check(self) -> Result<()> {
        // SAFETY: plain value argument.
        check(unsafe { ffi::dlb_dtype_check(self) })
    }

    fn name(self) -> Result<String> {
        let mut out = [0 as c_char; 64];
        // SAFETY: `out` is writable for its whole length.
        check(unsafe { ffi::dlb_dtype_name(self, out.as_mut_ptr(), out.len()) })?;
        // SAFETY: written NUL-terminated on success.
        Ok(unsafe { CStr::from_ptr(out.as_ptr()) }.to_string_lossy().into_owned())
    }

    fn from_name(name: &str) -> Result<DLDataType> {
        let c = CString::new(name)
            .map_err(|_| Error::new(Status::InvalidArgument, format!("dtype name {name:?} contains NUL")))?;
        let mut out = DLDataType::new(0, 0, 0);
        // SAFETY: valid C string and out pointer.
        check(unsafe { ffi::dlb_dtype_from_name(c.as_ptr(), &mut out) })?;
        Ok(out)
    }

    fn element_bytes(self) -> Option<usize> {
        let info = crate::buffer::describe_layout(self, &[], None).ok()?;
        if info.element_bits % 8 == 0 {
            Some(info.element_bits as usize / 8)
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
    /// What the table says about the type.
    pub flags: DeviceFlags,
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
        Ok(DeviceInfo { device_type: raw.device_type, flags: DeviceFlags::from_bits_retain(raw.flags), name })
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
        self.flags.contains(DeviceFlags::HOST_READABLE)
    }
    /// `data` is an address (byte_offset can be folded into it), not an
    /// opaque handle.
    pub fn data_is_address(&self) -> bool {
        self.flags.contains(DeviceFlags::ADDRESS)
    }
    /// The Python protocol's `stream` applies.
    pub fn has_streams(&self) -> bool {
        self.flags.contains(DeviceFlags::HAS_STREAMS)
    }
}

/// What the library's device table says about a device (`DLDevice` is
/// declared in `dlbridge-sys`, with `new` and `CPU`).
pub trait DeviceExt: Sized {
    /// The device of the type the library's table names `name`.
    fn named(name: &str, device_id: i32) -> Result<DLDevice>;
    /// What the library's device table says about this device's type.
    fn info(self) -> Result<DeviceInfo>;
    /// Whether the CPU can read this device's memory directly.
    fn is_host_accessible(&self) -> bool;
}

impl DeviceExt for DLDevice {
    fn named(name: &str, device_id: i32) -> Result<DLDevice> {
        Ok(DLDevice::new(DeviceInfo::named(name)?.device_type, device_id))
    }

    fn info(self) -> Result<DeviceInfo> {
        DeviceInfo::of(self.device_type)
    }

    fn is_host_accessible(&self) -> bool {
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
