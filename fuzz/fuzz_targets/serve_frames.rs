#![no_main]
// The body and what it checks: crates/fuzz/src/wire.rs.
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    unbloat_fuzz::wire::serve_frames(data);
});
