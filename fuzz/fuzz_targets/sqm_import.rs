#![no_main]
// The body and what it checks: crates/fuzz/src/files.rs.
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    unbloat_fuzz::files::sqm_import(data);
});
