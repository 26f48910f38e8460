//! Python objects in and out through the DLPack protocol, with pyo3
//! (feature `python`).
//!
//! - [`from_dlpack`] takes any object with `__dlpack__` (numpy, torch, JAX,
//!   a [`Tensor`] of this module, the `dlbridge` Python package's tensors)
//!   into a [`Buffer`], zero-copy when the producer shares its memory. `Buffer` implements
//!   `FromPyObject`, so a `#[pyfunction]` can take one as an argument.
//! - [`Tensor`] is a Python class holding a `Buffer`, with `__dlpack__` and
//!   `__dlpack_device__`, so `numpy.from_dlpack`, `torch.from_dlpack`,
//!   `jax.numpy.from_dlpack` take it without a copy. `Buffer` converts into
//!   one (`IntoPyObject`), so a `#[pyfunction]` can return one.
//!
//! The rules are the library's: the import checks (`dlb_import_versioned`,
//! `dlb_import_legacy`: malformed tensors, unknown versions and types,
//! read-only memory where writable was required), the export planner
//! (`dlb_export_versioned` / `dlb_export_legacy`: copy policy, target
//! device, stream, read-only memory in a legacy capsule) and the host-view
//! rule (`Buffer::host_view`). A refusal of the library is raised as
//! [`Error`] (on import) or [`ExportError`], a `BufferError` as the protocol
//! asks (on export); both carry `status` (the number) and `status_name`
//! (`"DLB_ERR_READ_ONLY"`, from `dlb_status_name`). A producer's own
//! exception (numpy's `BufferError` for a read-only array asked for a
//! legacy capsule, JAX's errors) is raised as the producer raised it.
//!
//! Producers' deleters may run Python code (numpy 1.x frees objects from
//! its deleter without taking the GIL), and the library may run a deleter
//! on any thread: every imported tensor's deleter is wrapped in one that
//! attaches to the interpreter first (and sets aside, then restores, an
//! exception already in flight); once the interpreter has gone, the
//! producer's tensor is left alone (leaked) rather than freed without it.
//!
//! ```ignore
//! use dlbridge::{python::Tensor, Buffer};
//! use pyo3::prelude::*;
//!
//! /// Doubles any float32 tensor in place (numpy, torch, JAX...).
//! #[pyfunction]
//! fn double(x: Buffer) -> PyResult<Tensor> {
//!     let view = x.host_view(true)?; // the library's rule: ReadOnly, Deleted, ...
//!     // ... write through view.data ...
//!     Ok(Tensor::from(x))
//! }
//! ```

use std::ffi::{c_void, CStr};
use std::ptr;

use pyo3::exceptions::{PyBufferError, PyException, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use pyo3::{ffi as pyffi, Borrowed};

use crate::dtype::DataTypeExt;
use crate::error::Status;
use crate::ffi::{self, DLManagedTensor, DLManagedTensorVersioned};
use crate::flags::BufferFlags;
use crate::options::{CopyPolicy, ExportOptions, ImportOptions};
use crate::Buffer;

pyo3::create_exception!(
    dlbridge,
    Error,
    PyException,
    "A refusal of the dlbridge library: `status` is the number, `status_name` its name (\"DLB_ERR_DELETED\")."
);
pyo3::create_exception!(
    dlbridge,
    ExportError,
    PyBufferError,
    "An export the dlbridge library refused (a BufferError, as the DLPack protocol asks), with `status` and `status_name`."
);

const VERSIONED: &CStr = c"dltensor_versioned";
const LEGACY: &CStr = c"dltensor";
const USED_VERSIONED: &CStr = c"used_dltensor_versioned";
const USED_LEGACY: &CStr = c"used_dltensor";

/// The Python exception of a library error: `E(text)` with `status` and
/// `status_name` set.
fn raise<E: pyo3::PyTypeInfo>(py: Python<'_>, e: &crate::Error) -> PyErr {
    let err = PyErr::new::<E, _>(e.to_string());
    let value = err.value(py);
    let _ = value.setattr("status", e.status().code());
    let _ = value.setattr("status_name", e.status().name());
    err
}

impl From<crate::Error> for PyErr {
    fn from(e: crate::Error) -> PyErr {
        Python::attach(|py| raise::<Error>(py, &e))
    }
}

// ---------------------------------------------------------------------------
// Import
// ---------------------------------------------------------------------------

/// Runs a producer's deleter with any exception already in flight set
/// aside (a deleter that runs Python code must not see or clear it).
fn keeping_exception(py: Python<'_>, run: impl FnOnce()) {
    let pending = PyErr::take(py);
    run();
    if let Some(e) = pending {
        e.restore(py);
    }
}

/// Deleter of the copy of a producer's versioned tensor handed to the
/// library: attaches to the interpreter, then runs the producer's deleter.
unsafe extern "C" fn attached_deleter_versioned(shim: *mut DLManagedTensorVersioned) {
    // SAFETY: shim came from Box::into_raw in import_capsule; manager_ctx is
    // the producer's tensor, still owned by this shim.
    let original = unsafe { Box::from_raw(shim) }.manager_ctx as *mut DLManagedTensorVersioned;
    // SAFETY: the producer's struct is valid until its deleter runs.
    if let Some(deleter) = unsafe { original.as_ref() }.and_then(|t| t.deleter) {
        // None: the interpreter is gone; the producer's memory leaks.
        // SAFETY: called once, as the producer's deleter expects.
        let _ = Python::try_attach(|py| keeping_exception(py, || unsafe { deleter(original) }));
    }
}

/// As `attached_deleter_versioned`, for a legacy tensor.
unsafe extern "C" fn attached_deleter_legacy(shim: *mut DLManagedTensor) {
    // SAFETY: as above.
    let original = unsafe { Box::from_raw(shim) }.manager_ctx as *mut DLManagedTensor;
    // SAFETY: as above.
    if let Some(deleter) = unsafe { original.as_ref() }.and_then(|t| t.deleter) {
        // SAFETY: as above.
        let _ = Python::try_attach(|py| keeping_exception(py, || unsafe { deleter(original) }));
    }
}

/// Takes a DLPack capsule in: the library imports the producer's tensor
/// (through a copy whose deleter attaches to the interpreter) and the
/// capsule is renamed `used_*`; on a refusal the capsule keeps the tensor,
/// and its own destructor frees it.
fn import_capsule(capsule: &Bound<'_, PyAny>, options: &ImportOptions) -> PyResult<Buffer> {
    let py = capsule.py();
    let raw = capsule.as_ptr();
    // SAFETY: PyCapsule_IsValid accepts any object and sets no exception.
    let versioned = unsafe { pyffi::PyCapsule_IsValid(raw, VERSIONED.as_ptr()) } == 1;
    // SAFETY: as above.
    let legacy = !versioned && unsafe { pyffi::PyCapsule_IsValid(raw, LEGACY.as_ptr()) } == 1;
    if !versioned && !legacy {
        // SAFETY: PyCapsule_CheckExact accepts any object.
        let what = if unsafe { pyffi::PyCapsule_CheckExact(raw) } == 0 {
            format!("__dlpack__ gave an object of type {}, not a DLPack capsule", capsule.get_type().name()?)
        } else {
            // SAFETY: a capsule; its name may be NULL.
            let name = unsafe { pyffi::PyCapsule_GetName(raw) };
            if name.is_null() {
                // SAFETY: clears the error GetName may have set.
                unsafe { pyffi::PyErr_Clear() };
                "a capsule without a name is not a DLPack capsule".to_string()
            } else {
                // SAFETY: a NUL-terminated name owned by the capsule.
                let name = unsafe { CStr::from_ptr(name) };
                if name == USED_VERSIONED || name == USED_LEGACY {
                    format!("the capsule was already consumed (named '{}')", name.to_string_lossy())
                } else {
                    format!("a capsule named '{}' is not a DLPack capsule", name.to_string_lossy())
                }
            }
        };
        return Err(raise::<Error>(py, &crate::Error::new(Status::InvalidArgument, what)));
    }
    if versioned {
        // SAFETY: a valid capsule of that name holds a non-NULL pointer.
        let original = unsafe { pyffi::PyCapsule_GetPointer(raw, VERSIONED.as_ptr()) } as *mut DLManagedTensorVersioned;
        // SAFETY: the producer's tensor, owned by the capsule; its stable
        // prefix (version) may always be read.
        let major = unsafe { (*original).version.major };
        let result = if major != 1 {
            // Only the stable prefix may be read: the library decides (and
            // refuses an unknown major with DLB_ERR_VERSION).
            // SAFETY: on failure the capsule still owns it.
            unsafe { crate::import_versioned(original, options) }
        } else {
            // SAFETY: a major-1 struct may be copied whole.
            let mut shim = Box::new(unsafe { ptr::read(original) });
            shim.manager_ctx = original as *mut c_void;
            shim.deleter = Some(attached_deleter_versioned);
            let shim = Box::into_raw(shim);
            // SAFETY: the shim is a valid tensor over the producer's memory;
            // on failure it is still ours.
            unsafe { crate::import_versioned(shim, options) }.inspect_err(|_| {
                // SAFETY: not taken by the library.
                drop(unsafe { Box::from_raw(shim) });
            })
        };
        let buffer = result.map_err(|e| raise::<Error>(py, &e))?;
        // SAFETY: the tensor now belongs to the buffer; the capsule's
        // destructor must not free it.
        unsafe { pyffi::PyCapsule_SetName(raw, USED_VERSIONED.as_ptr()) };
        Ok(buffer)
    } else {
        // SAFETY: as above.
        let original = unsafe { pyffi::PyCapsule_GetPointer(raw, LEGACY.as_ptr()) } as *mut DLManagedTensor;
        // SAFETY: a legacy struct has no version to check.
        let mut shim = Box::new(unsafe { ptr::read(original) });
        shim.manager_ctx = original as *mut c_void;
        shim.deleter = Some(attached_deleter_legacy);
        let shim = Box::into_raw(shim);
        // SAFETY: as above.
        let buffer = unsafe { crate::import_legacy(shim, options) }
            .inspect_err(|_| {
                // SAFETY: as above.
                drop(unsafe { Box::from_raw(shim) });
            })
            .map_err(|e| raise::<Error>(py, &e))?;
        // SAFETY: as above.
        unsafe { pyffi::PyCapsule_SetName(raw, USED_LEGACY.as_ptr()) };
        Ok(buffer)
    }
}

/// What [`from_dlpack_with`] asks of the producer and of the library.
#[derive(Clone, Debug, Default)]
pub struct FromDlpack {
    /// `copy` passed to the producer's `__dlpack__` (None: not passed).
    pub copy: Option<bool>,
    /// The library's import checks (`require_writable`, alignment,
    /// contiguity).
    pub import: ImportOptions,
}

/// Any object with `__dlpack__` as a [`Buffer`], zero-copy when the
/// producer shares its memory (see [`from_dlpack_with`]).
pub fn from_dlpack(obj: &Bound<'_, PyAny>) -> PyResult<Buffer> {
    from_dlpack_with(obj, &FromDlpack::default())
}

/// Any object with `__dlpack__` as a [`Buffer`].
///
/// A [`Tensor`] of this module, with default options, gives its own buffer
/// (another handle on it). Any other object (or a `Tensor` with options) is
/// asked `__dlpack__(max_version=(1, minor))`, with the DLPack version the
/// library speaks (`dlb_dlpack_version`), and `copy` when given; a
/// `TypeError` of that call earns one call without keywords (producers of
/// the protocol before DLPack 1.0, which cannot be asked to copy). What it
/// gives goes to the library's import with `options.import`. With
/// `copy: Some(true)`, a tensor the producer did not mark copied is copied
/// by the library's export planner (`Buffer::resolve`). The producer's
/// exceptions are raised as they are, the library's refusals as [`Error`]
/// with the status name.
pub fn from_dlpack_with(obj: &Bound<'_, PyAny>, options: &FromDlpack) -> PyResult<Buffer> {
    let py = obj.py();
    let default_import = ImportOptions::new();
    let plain = options.copy.is_none() && {
        let (a, b) = (options.import.as_raw(), default_import.as_raw());
        (a.require_alignment, a.require_contiguous, a.require_writable, a.flags)
            == (b.require_alignment, b.require_contiguous, b.require_writable, b.flags)
    };
    if plain {
        if let Ok(tensor) = obj.cast::<Tensor>() {
            return Ok(tensor.get().buffer.clone());
        }
    }
    let method = match obj.getattr("__dlpack__") {
        Ok(m) => m,
        Err(_) => {
            return Err(PyTypeError::new_err(format!("an object of type {} has no __dlpack__", obj.get_type().name()?)))
        }
    };
    let version = crate::dlpack_version();
    let kwargs = PyDict::new(py);
    kwargs.set_item("max_version", (version.major, version.minor))?;
    if let Some(copy) = options.copy {
        kwargs.set_item("copy", copy)?;
    }
    let capsule = match method.call((), Some(&kwargs)) {
        Ok(c) => c,
        Err(first) if first.is_instance_of::<PyTypeError>(py) => {
            // A producer of the protocol before 1.0 takes no keywords; what
            // this call raises is the producer's answer.
            method.call0()?
        }
        Err(e) => return Err(e),
    };
    let buffer = import_capsule(&capsule, &options.import)?;
    if options.copy == Some(true) && !buffer.flags().contains(BufferFlags::COPIED) {
        // A producer that ignored copy=True (or cannot say it copied: a
        // legacy capsule) shares its memory: the library's export planner
        // makes the copy that was asked for.
        return buffer.resolve(&ExportOptions::new().copy(CopyPolicy::Always)).map_err(|e| raise::<Error>(py, &e));
    }
    Ok(buffer)
}

impl<'a, 'py> FromPyObject<'a, 'py> for Buffer {
    type Error = PyErr;

    /// [`from_dlpack`] of the argument.
    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Buffer> {
        from_dlpack(&obj)
    }
}

// ---------------------------------------------------------------------------
// Export
// ---------------------------------------------------------------------------

/// Destructor of the capsules [`Tensor::__dlpack__`] makes: frees a tensor
/// no consumer took (a consumer renames the capsule `used_*`).
unsafe extern "C" fn capsule_destructor(capsule: *mut pyffi::PyObject) {
    // SAFETY: called by Python with a capsule; IsValid sets no exception.
    unsafe {
        if pyffi::PyCapsule_IsValid(capsule, VERSIONED.as_ptr()) == 1 {
            let t = pyffi::PyCapsule_GetPointer(capsule, VERSIONED.as_ptr());
            ffi::dlb_managed_free_versioned(t as *mut DLManagedTensorVersioned);
        } else if pyffi::PyCapsule_IsValid(capsule, LEGACY.as_ptr()) == 1 {
            let t = pyffi::PyCapsule_GetPointer(capsule, LEGACY.as_ptr());
            ffi::dlb_managed_free_legacy(t as *mut DLManagedTensor);
        }
    }
}

/// A capsule owning `tensor` (freed by its destructor unless consumed).
fn new_capsule<'py>(py: Python<'py>, tensor: *mut c_void, name: &'static CStr) -> PyResult<Bound<'py, PyAny>> {
    // SAFETY: a static name; the destructor handles both names.
    let raw = unsafe { pyffi::PyCapsule_New(tensor, name.as_ptr(), Some(capsule_destructor)) };
    // SAFETY: a new reference or NULL with an exception set.
    unsafe { Bound::from_owned_ptr_or_err(py, raw) }
}

/// A dlbridge buffer as a Python object that speaks the DLPack protocol:
/// `__dlpack__(*, stream=None, max_version=None, dl_device=None,
/// copy=None)` and `__dlpack_device__()`, plus `shape`, `strides`, `dtype`
/// (the library's name), `device`, `readonly`, `data_ptr`, `delete()`.
#[pyclass(frozen, name = "Tensor", module = "dlbridge")]
pub struct Tensor {
    buffer: Buffer,
}

impl Tensor {
    /// The buffer this tensor holds.
    pub fn buffer(&self) -> &Buffer {
        &self.buffer
    }
}

impl From<Buffer> for Tensor {
    fn from(buffer: Buffer) -> Tensor {
        Tensor { buffer }
    }
}

impl<'py> IntoPyObject<'py> for Buffer {
    type Target = Tensor;
    type Output = Bound<'py, Tensor>;
    type Error = PyErr;

    /// A new [`Tensor`] holding this buffer.
    fn into_pyobject(self, py: Python<'py>) -> PyResult<Bound<'py, Tensor>> {
        Bound::new(py, Tensor::from(self))
    }
}

#[pymethods]
impl Tensor {
    /// Exports the buffer as a DLPack capsule, as the library's export
    /// planner decides: `max_version` with a major of 1 or more gives a
    /// "dltensor_versioned" capsule, none (or a major below 1) a legacy
    /// "dltensor" one; `copy` True always copies, False never (refused when
    /// a copy is needed), None when needed; `dl_device` is the device the
    /// consumer wants; `stream` the consumer's stream. Refusals raise
    /// [`ExportError`], a `BufferError`.
    #[pyo3(signature = (*, stream=None, max_version=None, dl_device=None, copy=None))]
    fn __dlpack__<'py>(
        &self,
        py: Python<'py>,
        stream: Option<i64>,
        max_version: Option<(i64, i64)>,
        dl_device: Option<(i32, i32)>,
        copy: Option<bool>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let mut options = ExportOptions::new().copy(match copy {
            None => CopyPolicy::IfNeeded,
            Some(true) => CopyPolicy::Always,
            Some(false) => CopyPolicy::Never,
        });
        if let Some((device_type, device_id)) = dl_device {
            options = options.target_device(ffi::DLDevice::new(device_type, device_id));
        }
        if let Some(stream) = stream {
            options = options.given_stream(stream);
        }
        let versioned = max_version.is_some_and(|(major, _)| major >= 1);
        if versioned {
            let t = self.buffer.export(&options).map_err(|e| raise::<ExportError>(py, &e))?.into_raw();
            // SAFETY: on failure the tensor is still ours to free.
            new_capsule(py, t as *mut c_void, VERSIONED).inspect_err(|_| unsafe { ffi::dlb_managed_free_versioned(t) })
        } else {
            let t = self.buffer.export_legacy(&options).map_err(|e| raise::<ExportError>(py, &e))?.into_raw();
            // SAFETY: as above.
            new_capsule(py, t as *mut c_void, LEGACY).inspect_err(|_| unsafe { ffi::dlb_managed_free_legacy(t) })
        }
    }

    /// `(device_type, device_id)` of the buffer's memory.
    fn __dlpack_device__(&self) -> (i32, i32) {
        let d = self.buffer.device();
        (d.device_type, d.device_id)
    }

    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.buffer.shape())
    }

    /// Strides in elements.
    #[getter]
    fn strides<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.buffer.strides())
    }

    /// The library's name of the element type ("float32").
    #[getter]
    fn dtype(&self) -> PyResult<String> {
        Ok(self.buffer.dtype().name()?)
    }

    #[getter]
    fn device(&self) -> (i32, i32) {
        self.__dlpack_device__()
    }

    #[getter]
    fn readonly(&self) -> bool {
        self.buffer.is_read_only()
    }

    /// The address of the first element (data + byte_offset).
    #[getter]
    fn data_ptr(&self) -> usize {
        self.buffer.data_ptr() as usize
    }

    /// Deletes (donates) the buffer: later exports are refused with
    /// DLB_ERR_DELETED; exports already made stay valid.
    fn delete(&self) -> PyResult<()> {
        Ok(self.buffer.delete()?)
    }

    fn __repr__(&self) -> String {
        format!(
            "Tensor(shape={:?}, dtype={}, device={:?})",
            self.buffer.shape(),
            self.buffer.dtype().name().unwrap_or_default(),
            self.__dlpack_device__()
        )
    }
}

/// Adds [`Tensor`], [`Error`] and [`ExportError`] to a module (call it
/// from your `#[pymodule]`).
pub fn register(module: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = module.py();
    module.add_class::<Tensor>()?;
    module.add("Error", py.get_type::<Error>())?;
    module.add("ExportError", py.get_type::<ExportError>())?;
    Ok(())
}
