//! Gives this crate's own tests an rpath to the directory
//! where `dlbridge-sys` found the library (`DEP_DLBRIDGE_LIB_DIR`), so they
//! run without `LD_LIBRARY_PATH`. Finds, compiles and links nothing itself.

fn main() {
    println!("cargo:rerun-if-env-changed=DEP_DLBRIDGE_LIB_DIR");
    if let Ok(dir) = std::env::var("DEP_DLBRIDGE_LIB_DIR") {
        println!("cargo:rustc-link-arg-tests=-Wl,-rpath,{dir}");
    }
}
