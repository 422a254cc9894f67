#![no_main]
// The body and what it checks: crates/fuzz/src/probes.rs.
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    unbloat_fuzz::probes::irtt(data);
});
