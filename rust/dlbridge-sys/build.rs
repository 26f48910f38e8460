//! Finds libdlbridge and links it; nothing else (no C compiler, no header).
//!
//! Search: `DLBRIDGE_LIB_DIR`, then `pkg-config --libs-only-L dlbridge`,
//! then the linker's default paths. The directory found is passed on to
//! dependents as `DEP_DLBRIDGE_LIB_DIR`.

use std::env;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=DLBRIDGE_LIB_DIR");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    println!("cargo:rerun-if-changed=build.rs");
    let dirs = library_dirs();
    for dir in &dirs {
        println!("cargo:rustc-link-search=native={dir}");
    }
    if let Some(first) = dirs.first() {
        println!("cargo:lib_dir={first}");
    }
    println!("cargo:rustc-link-lib=dylib=dlbridge");
}

fn library_dirs() -> Vec<String> {
    if let Ok(dir) = env::var("DLBRIDGE_LIB_DIR") {
        if !dir.is_empty() {
            return vec![dir];
        }
    }
    match Command::new("pkg-config").args(["--libs-only-L", "dlbridge"]).output() {
        Ok(out) if out.status.success() => String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .filter_map(|flag| flag.strip_prefix("-L"))
            .map(str::to_string)
            .collect(),
        _ => {
            println!(
                "cargo:warning=DLBRIDGE_LIB_DIR is not set and pkg-config does not know dlbridge; \
                 relying on the linker's default search path"
            );
            Vec::new()
        }
    }
}
