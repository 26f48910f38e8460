//! The hand-written declarations of this crate (`src/lib.rs`) cannot drift
//! from the C header: bindgen reads `include/dlbridge/dlbridge.h` (with
//! libclang) and its output is compared, item by item, with the crate's
//! source as written, both parsed with `syn`:
//!
//! - every function the header declares is declared here with the same
//!   parameter and return types, and every function declared here is in
//!   the header;
//! - every struct bindgen emits (those the functions reach) is declared
//!   here `#[repr(C)]` with the same fields in the same order and of the
//!   same types, and has the size bindgen's layout says;
//! - every `DLB_` constant of the header is declared here with its value,
//!   and the DLPack constants declared here have the header's values.
//!
//! Types are compared after resolving aliases on both sides to the C type
//! they stand for (`dlb_status` and `c_int` are `i32`, `c_char` is `i8`);
//! a C enum is an `int`-sized integer whose signedness C leaves to the
//! compiler, so the enum types alone may be `i32` here and `u32` there.
//!
//! The header is found through `DLBRIDGE_INCLUDE_DIR`, else in this
//! repository (`../../include`), else through `pkg-config --cflags dlbridge`.
//! libclang is found by bindgen (`LIBCLANG_PATH` to choose one).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use quote::ToTokens;

fn include_dirs() -> Vec<PathBuf> {
    if let Ok(dir) = std::env::var("DLBRIDGE_INCLUDE_DIR") {
        if !dir.is_empty() {
            return vec![PathBuf::from(dir)];
        }
    }
    let here = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../include");
    if here.join("dlbridge/dlbridge.h").exists() {
        return vec![here];
    }
    let out = Command::new("pkg-config")
        .args(["--cflags-only-I", "dlbridge"])
        .output()
        .expect("no DLBRIDGE_INCLUDE_DIR, no ../../include, and pkg-config cannot run");
    assert!(out.status.success(), "set DLBRIDGE_INCLUDE_DIR: pkg-config does not know dlbridge");
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .filter_map(|flag| flag.strip_prefix("-I"))
        .map(PathBuf::from)
        .collect()
}

/// bindgen's declarations of the header, as Rust source.
fn generated() -> String {
    let dirs = include_dirs();
    let header = dirs
        .iter()
        .map(|d| d.join("dlbridge/dlbridge.h"))
        .find(|h| h.exists())
        .unwrap_or_else(|| panic!("dlbridge/dlbridge.h is in none of {dirs:?}"));
    let mut builder = bindgen::Builder::default()
        .header(header.to_string_lossy())
        .allowlist_function("dlb_.*")
        .allowlist_var("DLB_.*|DLPACK_FLAG_.*|kDL.*")
        .prepend_enum_name(false)
        .generate_comments(false)
        .layout_tests(true)
        // Macros cexpr cannot evaluate (UINT64_C(1) << 3) are asked of clang.
        .clang_macro_fallback();
    for dir in &dirs {
        builder = builder.clang_arg(format!("-I{}", dir.display()));
    }
    builder.generate().expect("bindgen could not read dlbridge.h").to_string()
}

/// A struct as declared: `#[repr(C)]`, and its fields (name, type) in order,
/// or None when opaque (only private zero-size markers).
type StructDecl = (bool, Option<Vec<(String, syn::Type)>>);

/// The items of one Rust source, by kind and name.
#[derive(Default)]
struct Items {
    /// function name -> (parameter types, return type), unresolved.
    functions: BTreeMap<String, (Vec<syn::Type>, Option<syn::Type>)>,
    structs: BTreeMap<String, StructDecl>,
    aliases: BTreeMap<String, syn::Type>,
    constants: BTreeMap<String, syn::Expr>,
}

fn collect(source: &str) -> Items {
    let file = syn::parse_file(source).expect("parse Rust source");
    let mut items = Items::default();
    for item in file.items {
        match item {
            syn::Item::ForeignMod(block) => {
                for foreign in block.items {
                    if let syn::ForeignItem::Fn(f) = foreign {
                        let params = f
                            .sig
                            .inputs
                            .iter()
                            .map(|arg| match arg {
                                syn::FnArg::Typed(t) => (*t.ty).clone(),
                                syn::FnArg::Receiver(_) => panic!("a receiver in an extern block"),
                            })
                            .collect();
                        let ret = match f.sig.output {
                            syn::ReturnType::Default => None,
                            syn::ReturnType::Type(_, t) => Some(*t),
                        };
                        items.functions.insert(f.sig.ident.to_string(), (params, ret));
                    }
                }
            }
            syn::Item::Struct(s) => {
                let repr_c = s.attrs.iter().any(|a| {
                    a.path().is_ident("repr") && a.meta.to_token_stream().to_string().replace(' ', "").contains("(C")
                });
                let fields: Vec<(String, syn::Type)> = s
                    .fields
                    .iter()
                    .map(|f| (f.ident.as_ref().map(|i| i.to_string()).unwrap_or_default(), f.ty.clone()))
                    .collect();
                let opaque = fields.iter().all(|(name, _)| name.starts_with('_'));
                items.structs.insert(s.ident.to_string(), (repr_c, if opaque { None } else { Some(fields) }));
            }
            syn::Item::Type(t) => {
                items.aliases.insert(t.ident.to_string(), (*t.ty).clone());
            }
            syn::Item::Const(c) if c.ident != "_" => {
                items.constants.insert(c.ident.to_string(), (*c.expr).clone());
            }
            _ => {}
        }
    }
    items
}

/// The C type a Rust type stands for, as a string: aliases resolved
/// through `aliases` (the side's own), paths reduced to their last segment,
/// `std::os::raw` names to primitives, function pointers without
/// parameter names, array lengths evaluated.
fn canonical(ty: &syn::Type, items: &Items, depth: u32) -> String {
    assert!(depth < 32, "alias loop at {}", ty.to_token_stream());
    match ty {
        syn::Type::Ptr(p) => {
            let mutability = if p.mutability.is_some() { "*mut " } else { "*const " };
            format!("{mutability}{}", canonical(&p.elem, items, depth + 1))
        }
        syn::Type::Paren(p) => canonical(&p.elem, items, depth + 1),
        syn::Type::Array(a) => {
            format!("[{}; {}]", canonical(&a.elem, items, depth + 1), evaluate(&a.len, &items.constants, 0))
        }
        syn::Type::BareFn(f) => {
            let params: Vec<String> = f.inputs.iter().map(|arg| canonical(&arg.ty, items, depth + 1)).collect();
            let ret = match &f.output {
                syn::ReturnType::Default => "()".to_string(),
                syn::ReturnType::Type(_, t) => canonical(t, items, depth + 1),
            };
            format!("fn({}) -> {ret}", params.join(", "))
        }
        syn::Type::Tuple(t) if t.elems.is_empty() => "()".to_string(),
        syn::Type::Path(p) => {
            let last = p.path.segments.last().expect("a path has a segment");
            let name = last.ident.to_string();
            if let syn::PathArguments::AngleBracketed(args) = &last.arguments {
                let inner: Vec<String> = args
                    .args
                    .iter()
                    .map(|a| match a {
                        syn::GenericArgument::Type(t) => canonical(t, items, depth + 1),
                        other => other.to_token_stream().to_string(),
                    })
                    .collect();
                return format!("{name}<{}>", inner.join(", "));
            }
            let primitive = match name.as_str() {
                "c_char" | "c_schar" => Some("i8"),
                "c_uchar" => Some("u8"),
                "c_short" => Some("i16"),
                "c_ushort" => Some("u16"),
                "c_int" => Some("i32"),
                "c_uint" => Some("u32"),
                "c_long" | "c_longlong" => Some("i64"),
                "c_ulong" | "c_ulonglong" => Some("u64"),
                _ => None,
            };
            if let Some(p) = primitive {
                return p.to_string();
            }
            match items.aliases.get(&name) {
                Some(target) => canonical(target, items, depth + 1),
                None => name,
            }
        }
        other => other.to_token_stream().to_string(),
    }
}

/// An integer constant expression (literals, other constants, arithmetic,
/// shifts, casts).
fn evaluate(expr: &syn::Expr, constants: &BTreeMap<String, syn::Expr>, depth: u32) -> i128 {
    assert!(depth < 32, "constant loop at {}", expr.to_token_stream());
    match expr {
        syn::Expr::Lit(syn::ExprLit { lit: syn::Lit::Int(i), .. }) => {
            i.base10_parse::<i128>().unwrap_or_else(|e| panic!("literal {i}: {e}"))
        }
        syn::Expr::Paren(p) => evaluate(&p.expr, constants, depth + 1),
        syn::Expr::Group(g) => evaluate(&g.expr, constants, depth + 1),
        syn::Expr::Cast(c) => evaluate(&c.expr, constants, depth + 1),
        syn::Expr::Unary(syn::ExprUnary { op: syn::UnOp::Neg(_), expr, .. }) => -evaluate(expr, constants, depth + 1),
        syn::Expr::Binary(b) => {
            let (l, r) = (evaluate(&b.left, constants, depth + 1), evaluate(&b.right, constants, depth + 1));
            match b.op {
                syn::BinOp::Add(_) => l + r,
                syn::BinOp::Sub(_) => l - r,
                syn::BinOp::Mul(_) => l * r,
                syn::BinOp::Div(_) => l / r,
                syn::BinOp::Shl(_) => l << r,
                syn::BinOp::Shr(_) => l >> r,
                syn::BinOp::BitOr(_) => l | r,
                syn::BinOp::BitAnd(_) => l & r,
                _ => panic!("operator in {}", expr.to_token_stream()),
            }
        }
        syn::Expr::Path(p) => {
            let name = p.path.segments.last().unwrap().ident.to_string();
            let target = constants.get(&name).unwrap_or_else(|| panic!("unknown constant {name}"));
            evaluate(target, constants, depth + 1)
        }
        other => panic!("not an integer constant: {}", other.to_token_stream()),
    }
}

/// A constant's value as text: an integer expression evaluated, a string
/// literal as its bytes up to the NUL.
fn constant_value(expr: &syn::Expr, constants: &BTreeMap<String, syn::Expr>) -> String {
    match expr {
        syn::Expr::Lit(syn::ExprLit { lit: syn::Lit::ByteStr(b), .. }) => {
            let bytes = b.value();
            String::from_utf8_lossy(bytes.strip_suffix(b"\0").unwrap_or(&bytes)).into_owned()
        }
        syn::Expr::Lit(syn::ExprLit { lit: syn::Lit::CStr(c), .. }) => c.value().to_string_lossy().into_owned(),
        syn::Expr::Lit(syn::ExprLit { lit: syn::Lit::Str(s), .. }) => s.value(),
        _ => evaluate(expr, constants, 0).to_string(),
    }
}

/// bindgen's layout assertions: struct name -> size in bytes.
fn generated_sizes(source: &str) -> BTreeMap<String, usize> {
    let mut sizes = BTreeMap::new();
    let mut rest = source;
    while let Some(at) = rest.find("[\"Size of ") {
        rest = &rest[at + "[\"Size of ".len()..];
        let name = &rest[..rest.find('"').unwrap()];
        let statement = &rest[..rest.find(';').unwrap()];
        let number = statement.rsplit("- ").next().unwrap();
        let digits: String = number.chars().take_while(|c| c.is_ascii_digit()).collect();
        sizes.insert(name.to_string(), digits.parse().unwrap());
    }
    sizes
}

/// Sizes of this crate's structs, by name. A struct bindgen emits must be
/// listed here (the test says so when one is missing).
fn crate_sizes() -> BTreeMap<&'static str, usize> {
    use dlbridge_sys::*;
    use std::mem::size_of;
    macro_rules! sizes {
        ($($t:ident),* $(,)?) => { BTreeMap::from([$((stringify!($t), size_of::<$t>())),*]) };
    }
    sizes!(
        DLDevice,
        DLDataType,
        DLTensor,
        DLManagedTensor,
        DLPackVersion,
        DLManagedTensorVersioned,
        dlb_export_options,
        dlb_import_options,
        dlb_backend_vtable,
        dlb_device_info,
        dlb_layout_info,
        dlb_host_view,
        dlb_share_descriptor,
        dlb_share_ticket,
    )
}

/// The names of C enum types in bindgen's output: aliases that constants
/// are declared with and that resolve to `u32`/`i32`.
fn enum_types(items: &Items) -> BTreeSet<String> {
    let mut enums = BTreeSet::new();
    for (name, ty) in &items.aliases {
        let canon = canonical(ty, items, 0);
        if (canon == "u32" || canon == "i32") && !name.starts_with("dlb_status") {
            enums.insert(name.clone());
        }
    }
    enums
}

#[test]
fn declarations_match_the_header() {
    let gen_source = generated();
    let gen = collect(&gen_source);
    let ours_source = include_str!("../src/lib.rs");
    let ours = collect(ours_source);
    let enums = enum_types(&gen);
    if let Ok(path) = std::env::var("DLBRIDGE_BINDGEN_OUT") {
        std::fs::write(path, &gen_source).expect("write DLBRIDGE_BINDGEN_OUT");
    }
    let mut problems: Vec<String> = Vec::new();

    // The same canonical form for both sides, but a C enum type may be
    // either signedness.
    let same = |a: &syn::Type, b: &syn::Type| -> (bool, String, String) {
        let (ca, cb) = (canonical(a, &gen, 0), canonical(b, &ours, 0));
        let enum_named = |t: &syn::Type| {
            let s = t.to_token_stream().to_string();
            enums.iter().any(|e| s.ends_with(e.as_str()))
        };
        let either_int = |s: &str| s == "u32" || s == "i32";
        let ok = ca == cb || (enum_named(a) && either_int(&ca) && either_int(&cb));
        (ok, ca, cb)
    };

    // Functions, both ways.
    for (name, (params, ret)) in &gen.functions {
        let Some((our_params, our_ret)) = ours.functions.get(name) else {
            problems.push(format!("function {name} is in the header but not declared in dlbridge-sys"));
            continue;
        };
        if params.len() != our_params.len() {
            problems.push(format!(
                "function {name}: the header has {} parameters, dlbridge-sys {}",
                params.len(),
                our_params.len()
            ));
            continue;
        }
        for (i, (a, b)) in params.iter().zip(our_params).enumerate() {
            let (ok, ca, cb) = same(a, b);
            if !ok {
                problems.push(format!("function {name}, parameter {i}: the header has {ca}, dlbridge-sys {cb}"));
            }
        }
        match (ret, our_ret) {
            (None, None) => {}
            (Some(a), Some(b)) => {
                let (ok, ca, cb) = same(a, b);
                if !ok {
                    problems.push(format!("function {name} returns {ca} in the header, {cb} in dlbridge-sys"));
                }
            }
            _ => problems.push(format!("function {name}: one side returns a value, the other nothing")),
        }
    }
    for name in ours.functions.keys() {
        if !gen.functions.contains_key(name) {
            problems.push(format!("function {name} is declared in dlbridge-sys but not in the header"));
        }
    }

    // Structs: fields, repr(C), sizes.
    let gen_sizes = generated_sizes(&gen_source);
    let our_sizes = crate_sizes();
    for (name, (_, fields)) in &gen.structs {
        let Some((repr_c, our_fields)) = ours.structs.get(name) else {
            problems.push(format!("struct {name} is in the header but not declared in dlbridge-sys"));
            continue;
        };
        match (fields, our_fields) {
            (None, None) => continue, // opaque on both sides
            (Some(fields), Some(our_fields)) => {
                if !repr_c {
                    problems.push(format!("struct {name} is not #[repr(C)] in dlbridge-sys"));
                }
                let names: Vec<&str> = fields.iter().map(|(n, _)| n.as_str()).collect();
                let our_names: Vec<&str> = our_fields.iter().map(|(n, _)| n.as_str()).collect();
                if names != our_names {
                    problems
                        .push(format!("struct {name}: fields {names:?} in the header, {our_names:?} in dlbridge-sys"));
                    continue;
                }
                for ((field, a), (_, b)) in fields.iter().zip(our_fields) {
                    let (ok, ca, cb) = same(a, b);
                    if !ok {
                        problems.push(format!("struct {name}.{field}: the header has {ca}, dlbridge-sys {cb}"));
                    }
                }
            }
            _ => problems.push(format!("struct {name} is opaque on one side only")),
        }
        match (gen_sizes.get(name), our_sizes.get(name.as_str())) {
            (Some(c), Some(r)) if c != r => {
                problems.push(format!("struct {name} is {c} bytes in C, {r} in dlbridge-sys"));
            }
            (Some(_), None) => problems.push(format!("struct {name}: add it to crate_sizes() in this test")),
            _ => {}
        }
    }

    // Constants: every DLB_ one of the header, with its value; the DLPack
    // ones this crate declares.
    let mut compared = 0;
    for (name, expr) in &gen.constants {
        let value = constant_value(expr, &gen.constants);
        match ours.constants.get(name) {
            Some(our) => {
                compared += 1;
                let our_value = constant_value(our, &ours.constants);
                if value != our_value {
                    problems.push(format!("constant {name} is {value} in the header, {our_value} in dlbridge-sys"));
                }
            }
            // What the header found of dlpack.h when it was compiled, not ABI.
            None if name.ends_with("_DECLARED_BY_DLBRIDGE") => {}
            None if name.starts_with("DLB_") => {
                problems.push(format!("constant {name} (= {value}) is in the header but not in dlbridge-sys"));
            }
            None => {}
        }
    }

    println!(
        "compared {} functions, {} structs, {compared} constants with bindgen's reading of dlbridge.h",
        gen.functions.len(),
        gen.structs.len()
    );
    assert!(problems.is_empty(), "dlbridge-sys differs from the header:\n  {}", problems.join("\n  "));
    assert!(gen.functions.len() >= 80, "bindgen found only {} functions", gen.functions.len());
    assert!(compared >= 60, "only {compared} constants compared");
}
