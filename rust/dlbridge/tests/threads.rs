//! Handles and exports cross threads; counts stay exact.

mod common;

use std::sync::atomic::Ordering;
use std::thread;

use common::{count, counter, ForeignSpec};
use dlbridge::{import_versioned, live_exports, Buffer, ExportOptions, ImportOptions, ManagedTensor};

fn assert_send_sync<T: Send + Sync>() {}
fn assert_send<T: Send>() {}

#[test]
fn handle_types_are_thread_safe() {
    assert_send_sync::<Buffer>();
    assert_send::<ManagedTensor>();
    assert_send::<dlbridge::LegacyManagedTensor>();
    assert_send_sync::<dlbridge::Error>();
}

#[test]
fn exports_made_here_dropped_on_other_threads() {
    let _g = common::serial();
    let buf = Buffer::wrap_vec((0..1000).map(|i| i as f64).collect::<Vec<_>>(), &[10, 100]).unwrap();
    let exports: Vec<ManagedTensor> = (0..64).map(|_| buf.export(&ExportOptions::new()).unwrap()).collect();
    assert_eq!(live_exports(), 64);
    assert_eq!(buf.refcount(), 65);
    let handles: Vec<_> = exports
        .into_iter()
        .map(|t| {
            thread::spawn(move || {
                let sum: f64 =
                    unsafe { std::slice::from_raw_parts(t.data_ptr().unwrap() as *const f64, 1000) }.iter().sum();
                drop(t);
                sum
            })
        })
        .collect();
    for h in handles {
        assert_eq!(h.join().unwrap(), 499500.0);
    }
    assert_eq!(live_exports(), 0);
    assert_eq!(buf.refcount(), 1);
}

#[test]
fn shared_buffer_exported_and_imported_from_many_threads() {
    let _g = common::serial();
    let deleted = counter();
    let raw = ForeignSpec::new((0..256).collect::<Vec<u32>>(), &[16, 16]).versioned(&deleted);
    let buf = unsafe { import_versioned(raw, &ImportOptions::new()) }.unwrap();
    thread::scope(|s| {
        for k in 0..8 {
            let b = &buf;
            s.spawn(move || {
                for i in 0..200 {
                    let clone = b.clone();
                    let t = clone.export(&ExportOptions::new()).unwrap();
                    let again = t.into_buffer(&ImportOptions::new()).unwrap();
                    assert_eq!(again.get::<u32>(&[(i % 16) as i64, k]).unwrap(), ((i % 16) * 16) as u32 + k as u32);
                }
            });
        }
    });
    // A handle moved to another thread and released there.
    let moved = buf.clone();
    thread::spawn(move || drop(moved)).join().unwrap();
    assert_eq!(buf.refcount(), 1);
    assert_eq!(count(&deleted), 0);
    // The last reference goes on another thread: the deleter runs there, once.
    thread::spawn(move || drop(buf)).join().unwrap();
    assert_eq!(deleted.load(Ordering::SeqCst), 1);
    assert_eq!(live_exports(), 0);
}
