//! Typed bit sets for the C flag words: one type per word, each constant
//! the C constant of the same name (`BufferFlags::READ_ONLY` is
//! `DLB_BUFFER_READ_ONLY`). Written by hand in the manner of the
//! `bitflags` crate: `|`, `&`, `-`, `contains`, `bits`, `from_bits`.

use std::fmt;
use std::ops::{BitAnd, BitAndAssign, BitOr, BitOrAssign, Sub, SubAssign};

use crate::ffi;

macro_rules! flag_set {
    ($(#[$meta:meta])* $name:ident: $repr:ty { $($(#[$fmeta:meta])* $flag:ident = $value:expr;)+ }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
        pub struct $name($repr);

        impl $name {
            $($(#[$fmeta])* pub const $flag: $name = $name($value);)+
            const NAMED: &'static [(&'static str, $repr)] = &[$((stringify!($flag), $value)),+];

            /// No bit set.
            pub const fn empty() -> Self {
                $name(0)
            }
            /// Every bit this type names.
            pub const fn all() -> Self {
                $name(0 $(| $value)+)
            }
            /// The C value.
            pub const fn bits(self) -> $repr {
                self.0
            }
            /// The set for a C value; `None` when it has a bit this type
            /// does not name.
            pub const fn from_bits(bits: $repr) -> Option<Self> {
                if bits & !Self::all().0 == 0 {
                    Some($name(bits))
                } else {
                    None
                }
            }
            /// The set for a C value, keeping bits this type does not name
            /// (a newer library's).
            pub const fn from_bits_retain(bits: $repr) -> Self {
                $name(bits)
            }
            pub const fn is_empty(self) -> bool {
                self.0 == 0
            }
            /// Every bit of `other` is set here.
            pub const fn contains(self, other: Self) -> bool {
                self.0 & other.0 == other.0
            }
            /// Some bit of `other` is set here.
            pub const fn intersects(self, other: Self) -> bool {
                self.0 & other.0 != 0
            }
            pub fn insert(&mut self, other: Self) {
                self.0 |= other.0;
            }
            pub fn remove(&mut self, other: Self) {
                self.0 &= !other.0;
            }
            /// Inserts `other` when `on`, else removes it.
            pub fn set(&mut self, other: Self, on: bool) {
                if on {
                    self.insert(other)
                } else {
                    self.remove(other)
                }
            }
        }

        impl BitOr for $name {
            type Output = Self;
            fn bitor(self, other: Self) -> Self {
                $name(self.0 | other.0)
            }
        }
        impl BitOrAssign for $name {
            fn bitor_assign(&mut self, other: Self) {
                self.0 |= other.0;
            }
        }
        impl BitAnd for $name {
            type Output = Self;
            fn bitand(self, other: Self) -> Self {
                $name(self.0 & other.0)
            }
        }
        impl BitAndAssign for $name {
            fn bitand_assign(&mut self, other: Self) {
                self.0 &= other.0;
            }
        }
        impl Sub for $name {
            type Output = Self;
            fn sub(self, other: Self) -> Self {
                $name(self.0 & !other.0)
            }
        }
        impl SubAssign for $name {
            fn sub_assign(&mut self, other: Self) {
                self.0 &= !other.0;
            }
        }

        /// The names of the bits set, `A | B`; bits without a name in hex.
        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                let mut rest = self.0;
                let mut first = true;
                f.write_str(concat!(stringify!($name), "("))?;
                for &(name, bit) in Self::NAMED {
                    if bit != 0 && rest & bit == bit {
                        f.write_str(if first { "" } else { " | " })?;
                        f.write_str(name)?;
                        rest &= !bit;
                        first = false;
                    }
                }
                if rest != 0 {
                    write!(f, "{}{:#x}", if first { "" } else { " | " }, rest)?;
                } else if first {
                    f.write_str("empty")?;
                }
                f.write_str(")")
            }
        }
    };
}

flag_set! {
    /// What a buffer is (`dlb_buffer_flags`, `DLB_BUFFER_*`); `READ_ONLY` is
    /// also what `Buffer::wrap_boxed_slice_strided` and
    /// `Buffer::from_raw_parts` take.
    BufferFlags: u64 {
        /// The memory must not be written through any export.
        READ_ONLY = ffi::DLB_BUFFER_READ_ONLY;
        /// A backend storage that never changes once created.
        IMMUTABLE = ffi::DLB_BUFFER_IMMUTABLE;
        /// Reported: `Buffer::delete` was called (donated).
        DELETED = ffi::DLB_BUFFER_DELETED;
        /// Reported: imported from a producer that marked it IS_COPIED, or a
        /// copy `Buffer::resolve` made.
        COPIED = ffi::DLB_BUFFER_COPIED;
        /// Reported: a tensor imported from another producer.
        IMPORTED = ffi::DLB_BUFFER_IMPORTED;
        /// Reported: a storage on a backend other than the host.
        BACKEND = ffi::DLB_BUFFER_BACKEND;
    }
}

flag_set! {
    /// The flags of a DLPack 1.x managed tensor (`DLPACK_FLAG_BITMASK_*`).
    DlpackFlags: u64 {
        /// The consumer must not write the memory.
        READ_ONLY = ffi::DLPACK_FLAG_BITMASK_READ_ONLY;
        /// The producer made a copy for this export.
        IS_COPIED = ffi::DLPACK_FLAG_BITMASK_IS_COPIED;
        /// Sub-byte elements are padded to a byte each.
        IS_SUBBYTE_TYPE_PADDED = ffi::DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED;
    }
}

flag_set! {
    /// What the library's device table says about a device type
    /// (`DLB_DEVICE_*`).
    DeviceFlags: u32 {
        /// DLPack defines the type.
        KNOWN = ffi::DLB_DEVICE_KNOWN;
        /// The CPU reads `data` directly.
        HOST_READABLE = ffi::DLB_DEVICE_HOST_READABLE;
        /// `data` is an address, not an opaque handle.
        ADDRESS = ffi::DLB_DEVICE_ADDRESS;
        /// The Python protocol's `stream` applies.
        HAS_STREAMS = ffi::DLB_DEVICE_HAS_STREAMS;
        /// Memory the built-in CUDA backend takes in and allocates.
        CUDA_BACKEND = ffi::DLB_DEVICE_CUDA_BACKEND;
    }
}

flag_set! {
    /// What `validate` requires beyond the DLPack rules (`DLB_VALIDATE_*`).
    ValidateFlags: u32 {
        /// Compact row-major elements.
        CONTIGUOUS = ffi::DLB_VALIDATE_CONTIGUOUS;
        /// `strides` present (not NULL) when `ndim > 0`.
        STRIDES_REQUIRED = ffi::DLB_VALIDATE_STRIDES_REQUIRED;
    }
}

#[cfg(all(unix, feature = "share"))]
flag_set! {
    /// Flags of the sharing calls (`DLB_SHARE_*`).
    ShareFlags: u64 {
        /// `share`: memory not shared yet is copied once into new shared
        /// memory (else `Status::NotZeroCopy`).
        COPY_IF_NEEDED = ffi::DLB_SHARE_COPY_IF_NEEDED;
        /// What the call makes is read-only: a descriptor or ticket (its
        /// receivers map it read-only), a copy, a mapping.
        READ_ONLY = ffi::DLB_SHARE_READ_ONLY;
        /// The library takes the file descriptor; refused by this crate's
        /// calls, which only borrow it.
        TAKE_FD = ffi::DLB_SHARE_TAKE_FD;
        /// `Ticket::open`: accepted for compatibility; every open asks the
        /// issuer's ticket server for the file.
        VIA_SERVER = ffi::DLB_SHARE_VIA_SERVER;
    }
}
