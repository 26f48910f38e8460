//! A Python extension module for testing `dlbridge::python` from Python
//! (`tests/test_python.py`): functions that take any `__dlpack__` object as
//! a `dlbridge::Buffer` and give `dlbridge::python::Tensor`s back.

use dlbridge::python::{self, FromDlpack, Tensor};
use dlbridge::{Buffer, BufferFlags, DLDataType, ImportOptions};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

/// The object as a buffer and back, zero-copy.
#[pyfunction]
fn roundtrip(x: Buffer) -> Buffer {
    x
}

/// The object as a buffer that must be writable (the library refuses
/// read-only memory with DLB_ERR_READ_ONLY).
#[pyfunction]
fn writable(x: &Bound<'_, PyAny>) -> PyResult<Buffer> {
    python::from_dlpack_with(x, &FromDlpack { copy: None, import: ImportOptions::new().require_writable(true) })
}

/// The object's buffer asked for with `copy` passed to the producer.
#[pyfunction]
fn copied(x: &Bound<'_, PyAny>, copy: bool) -> PyResult<Buffer> {
    python::from_dlpack_with(x, &FromDlpack { copy: Some(copy), import: ImportOptions::new() })
}

/// The address of the first element as the buffer sees it.
#[pyfunction]
fn data_ptr(x: Buffer) -> usize {
    x.data_ptr() as usize
}

/// The elements as Python floats, read through the library's host view
/// (or its strided copy).
#[pyfunction]
fn values(x: Buffer) -> PyResult<Vec<f64>> {
    let d = x.dtype();
    Ok(if d == DLDataType::F32 {
        x.to_vec::<f32>()?.into_iter().map(f64::from).collect()
    } else if d == DLDataType::F64 {
        x.to_vec::<f64>()?
    } else if d == DLDataType::I64 {
        x.to_vec::<i64>()?.into_iter().map(|v| v as f64).collect()
    } else if d == DLDataType::I32 {
        x.to_vec::<i32>()?.into_iter().map(f64::from).collect()
    } else {
        return Err(PyValueError::new_err(format!("values() reads float32, float64, int32, int64, not {d:?}")));
    })
}

/// Writes `value` into every element through the library's write view
/// (refused for read-only, deleted, strided memory: the library's status).
#[pyfunction]
fn fill(x: Buffer, value: f64) -> PyResult<()> {
    let view = x.host_view(true)?;
    let n = view.numel as usize;
    // SAFETY: the library's writable host view of n compact elements of
    // view.dtype, alive while x is; nothing else reads them during the call
    // (the GIL is held).
    unsafe {
        if view.dtype == DLDataType::F32 {
            std::slice::from_raw_parts_mut(view.data as *mut f32, n).fill(value as f32);
        } else if view.dtype == DLDataType::F64 {
            std::slice::from_raw_parts_mut(view.data as *mut f64, n).fill(value);
        } else {
            return Err(PyValueError::new_err("fill() writes float32 and float64"));
        }
    }
    Ok(())
}

/// A Rust-owned float32 buffer 0, 1, ..., n-1 of `shape`, as a Tensor.
#[pyfunction]
#[pyo3(signature = (shape, read_only=false))]
fn arange_f32(shape: Vec<i64>, read_only: bool) -> PyResult<Tensor> {
    let n: i64 = shape.iter().product();
    let data: Vec<f32> = (0..n).map(|v| v as f32).collect();
    let flags = if read_only { BufferFlags::READ_ONLY } else { BufferFlags::empty() };
    Ok(Tensor::from(Buffer::wrap_boxed_slice_strided(data.into_boxed_slice(), &shape, None, 0, flags)?))
}

/// Managed tensors the library exported whose deleter has not run.
#[pyfunction]
fn live_exports() -> i64 {
    dlbridge::live_exports()
}

/// The buffer's reference count (handles and exports).
#[pyfunction]
fn refcount(t: &Bound<'_, Tensor>) -> i64 {
    t.get().buffer().refcount()
}

/// docs/rust.md's example, word for word: doubles any float32 tensor in
/// place.
#[pyfunction]
fn double(x: Buffer) -> PyResult<Buffer> {
    let view = x.host_view(true)?; // the library says whether it may be written
    if view.dtype != dlbridge::DLDataType::F32 {
        return Err(pyo3::exceptions::PyTypeError::new_err("float32 only"));
    }
    // SAFETY: the library's writable view of `numel` compact elements,
    // alive while `x` is.
    let xs = unsafe { std::slice::from_raw_parts_mut(view.data as *mut f32, view.numel as usize) };
    xs.iter_mut().for_each(|v| *v *= 2.0);
    Ok(x) // back to Python as a dlbridge Tensor over the same memory
}

/// Drops the buffer on another thread, detached from the interpreter: the
/// producer's deleter must attach to it on its own.
#[pyfunction]
fn drop_on_thread(py: Python<'_>, x: Buffer) {
    py.detach(move || std::thread::spawn(move || drop(x)).join().expect("the dropping thread panicked"));
}

/// Drops the buffer while a ValueError("kept") is in flight, then raises
/// that error: the producer's deleter must neither see nor clear it.
#[pyfunction]
fn drop_while_raising(py: Python<'_>, x: Buffer) -> PyResult<()> {
    PyValueError::new_err("kept").restore(py);
    drop(x);
    Err(PyErr::fetch(py))
}

#[pymodule]
fn dlbridge_pytest(m: &Bound<'_, PyModule>) -> PyResult<()> {
    python::register(m)?;
    m.add_function(wrap_pyfunction!(roundtrip, m)?)?;
    m.add_function(wrap_pyfunction!(writable, m)?)?;
    m.add_function(wrap_pyfunction!(copied, m)?)?;
    m.add_function(wrap_pyfunction!(data_ptr, m)?)?;
    m.add_function(wrap_pyfunction!(values, m)?)?;
    m.add_function(wrap_pyfunction!(fill, m)?)?;
    m.add_function(wrap_pyfunction!(arange_f32, m)?)?;
    m.add_function(wrap_pyfunction!(live_exports, m)?)?;
    m.add_function(wrap_pyfunction!(refcount, m)?)?;
    m.add_function(wrap_pyfunction!(double, m)?)?;
    m.add_function(wrap_pyfunction!(drop_on_thread, m)?)?;
    m.add_function(wrap_pyfunction!(drop_while_raising, m)?)?;
    Ok(())
}
