//! Finds libdlbridge and links it; nothing else (no C compiler, no header).
//!
//! Where it looks, in this order:
//! 1. pkg-config: the `dlbridge` package (its `dlbridge.pc` is installed
//!    with the library; `PKG_CONFIG_PATH` picks another one, a meson build
//!    directory's `meson-uninstalled` folder included). Skipped when
//!    `DLBRIDGE_NO_PKG_CONFIG` is set (the `pkg-config` crate's rule).
//! 2. `DLBRIDGE_LIB_DIR`: a directory holding `libdlbridge.so` (or `.a`).
//!
//! Neither: the build stops with a message naming both. When pkg-config
//! finds the library and `DLBRIDGE_LIB_DIR` names another directory, the
//! build says so in a warning (`DLBRIDGE_NO_PKG_CONFIG=1` makes it use
//! `DLBRIDGE_LIB_DIR`). The directory found
//! is passed on to dependents as `DEP_DLBRIDGE_LIB_DIR` (the `links` key).

use std::env;
use std::path::Path;

fn main() {
    println!("cargo:rerun-if-env-changed=DLBRIDGE_LIB_DIR");
    println!("cargo:rerun-if-changed=build.rs");
    // The pkg-config crate prints its own rerun-if-env-changed lines
    // (PKG_CONFIG_PATH, DLBRIDGE_NO_PKG_CONFIG, ...).
    let pkg_config_error = match pkg_config::Config::new().atleast_version("0.1").probe("dlbridge") {
        Ok(library) => {
            // The crate printed the link lines; tell dependents where.
            if let Some(dir) = library.link_paths.first() {
                println!("cargo:lib_dir={}", dir.display());
                if let Ok(asked) = env::var("DLBRIDGE_LIB_DIR") {
                    if !asked.is_empty() && Path::new(&asked) != dir.as_path() {
                        println!(
                            "cargo:warning=pkg-config found libdlbridge in {}; DLBRIDGE_LIB_DIR ({asked}) comes \
                             after it and is not used (set DLBRIDGE_NO_PKG_CONFIG=1 to use it)",
                            dir.display()
                        );
                    }
                }
            }
            return;
        }
        Err(e) => e,
    };
    match env::var("DLBRIDGE_LIB_DIR") {
        Ok(dir) if !dir.is_empty() => {
            let found = ["libdlbridge.so", "libdlbridge.a", "libdlbridge.dylib"]
                .iter()
                .any(|name| Path::new(&dir).join(name).exists());
            if !found {
                fail(&format!(
                    "DLBRIDGE_LIB_DIR is '{dir}', which holds no libdlbridge.so or libdlbridge.a \
                     (and pkg-config did not find dlbridge: {})",
                    one_line(&pkg_config_error.to_string())
                ));
            }
            println!("cargo:rustc-link-search=native={dir}");
            println!("cargo:rustc-link-lib=dlbridge");
            println!("cargo:lib_dir={dir}");
        }
        _ => fail(&format!(
            "libdlbridge was not found: pkg-config does not know the package 'dlbridge' ({}), \
             and DLBRIDGE_LIB_DIR is not set. Install dlbridge (its dlbridge.pc on PKG_CONFIG_PATH), \
             or set DLBRIDGE_LIB_DIR to the directory holding libdlbridge.so",
            one_line(&pkg_config_error.to_string())
        )),
    }
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn fail(message: &str) -> ! {
    // cargo shows this as the build's error (cargo 1.84 and newer).
    println!("cargo::error={message}");
    std::process::exit(1);
}
