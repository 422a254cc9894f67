#![no_main]
// The body and what it checks: crates/fuzz/src/kernel.rs.
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    unbloat_fuzz::kernel::netlink(data);
});
