//! Tests that need a real kernel's qdiscs: run the test body here when this kernel has them,
//! otherwise re-run the same test binary, filtered to that one test, inside User-Mode Linux.
//!
//! ```no_run
//! unbloat_testbed::real_kernel_test! {
//!     /// cake shapes a veth (doc comments and attributes pass through).
//!     fn cake_on_a_veth() needs ["cake", "htb"] {
//!         // runs as root in a kernel with cake and htb: on the host, or in a UML guest
//!     }
//! }
//! ```
//!
//! or by hand, when the body must come first in a function of its own:
//!
//! ```no_run
//! use unbloat_testbed::kernel::run_test_in_real_kernel;
//!
//! #[test]
//! fn cake_on_a_veth() {
//!     if !run_test_in_real_kernel(concat!(module_path!(), "::cake_on_a_veth"), &["cake"]) {
//!         return; // it ran, and passed, in a guest
//!     }
//!     // ... the body ...
//! }
//! ```
//!
//! A test can never pass without its body having run: the guest's libtest must report exactly one
//! test run and passed, or the host test panics with the guest's output. When neither the host
//! nor UML can run it, it panics with the reason (never a silent skip).

use super::{in_guest, GuestOptions, Kernel};
use unbloat_system::runner::Cmd;

/// The name libtest knows a test by, from the path `module_path!()` gives: the crate's name
/// (its first segment) is dropped. `kernel_runner::x` -> `x`; `unbloat_lab::topology::tests::x`
/// -> `topology::tests::x`.
pub fn libtest_name(test_path: &str) -> &str {
    test_path
        .split_once("::")
        .map_or(test_path, |(_, rest)| rest)
}

/// Returns true when the caller should run the test body in this process: we are in a guest
/// already, or this kernel has every qdisc in `required`. Otherwise it runs the test
/// (`test_path` as `concat!(module_path!(), "::name")` gives it) in a User-Mode Linux guest, with
/// its output streamed, panics unless exactly that one test passed there, and returns false.
pub fn run_test_in_real_kernel(test_path: &str, required: &[&str]) -> bool {
    in_guest() || run_test_in(Kernel::detect(required), test_path, required)
}

/// [`run_test_in_real_kernel`] for a test that must run in User-Mode Linux whatever this kernel
/// has (it unloads a module, or steps the clock): true only inside the guest. Outside, the guest
/// holds a shared [`slot`](super::slot) while it runs, as every guest does. The choice is forced
/// here, not through `$UNBLOAT_KERNEL`, which the test's other threads read.
pub fn run_test_in_uml(test_path: &str, required: &[&str]) -> bool {
    if in_guest() {
        return true;
    }
    run_test_in(Kernel::detect_forced("uml", required), test_path, required)
}

/// Runs the test in `kernel`'s guest and returns false; true (run the body here) for the host.
fn run_test_in(
    kernel: Result<Kernel, super::KernelError>,
    test_path: &str,
    required: &[&str],
) -> bool {
    let kernel = match kernel {
        Ok(kernel) => kernel,
        Err(e) => panic!(
            "test {test_path} needs a kernel with {}: {e}",
            required.join(", ")
        ),
    };
    if kernel == Kernel::Host {
        return true;
    }
    let name = libtest_name(test_path);
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => panic!("test {test_path}: cannot find this test binary to re-run it: {e}"),
    };
    let argv: Vec<String> = [exe.display().to_string(), name.to_string()]
        .into_iter()
        .chain(
            [
                "--exact",
                "--nocapture",
                "--test-threads=1",
                "--color=never",
            ]
            .map(String::from),
        )
        .collect();
    let opts = GuestOptions {
        stream: true,
        // Three times the default: the kill-at-every-step replace test runs over 900 s in
        // User-Mode Linux on hosts with slow system calls (an EPYC with SRSO's Safe RET), and
        // beside a second test thread. A hung guest is still killed.
        timeout: std::time::Duration::from_secs(1800),
        ..GuestOptions::default()
    };
    let out = match kernel.run(&argv, &opts) {
        Ok(out) => out,
        Err(e) => panic!(
            "test {test_path} could not run in {}: {e}",
            kernel.describe()
        ),
    };
    if let Err(why) = check_single_pass(out.status, &out.stdout) {
        panic!(
            "test {name} in {}: {why}\n`{}` printed:\n{}\n{}",
            kernel.describe(),
            Cmd::new(&argv[0]).args(&argv[1..]).display(),
            super::tail_lines(&out.stdout, 60),
            super::tail_lines(&out.stderr, 60)
        );
    }
    false
}

/// Ok when a libtest run exited 0 and says it ran exactly one test, which passed.
pub(crate) fn check_single_pass(status: i32, stdout: &str) -> Result<(), String> {
    if status != 0 {
        return Err(format!("it failed (exit status {status})"));
    }
    let ran_one = stdout.lines().any(|l| l.trim() == "running 1 test");
    let passed_one = stdout.lines().any(|l| {
        l.trim_start()
            .starts_with("test result: ok. 1 passed; 0 failed;")
    });
    if ran_one && passed_one {
        Ok(())
    } else {
        Err(
            "it did not run exactly one test (a filtered-out or misnamed test cannot pass)"
                .to_string(),
        )
    }
}

/// Defines `#[test]` functions whose bodies run in a kernel that has the listed qdiscs (see the
/// module doc of `unbloat_testbed::kernel`): `fn name() needs ["cake", ...] { body }`, repeated.
/// `fn name() needs [...] alone { body }` runs with no other test's guest beside it
/// ([`slot`](crate::kernel::slot)): for a test whose result hangs on timing.
#[macro_export]
macro_rules! real_kernel_test {
    () => {};
    (@one $share:ident, $(#[$meta:meta])* fn $name:ident() needs [$($kind:expr),*] $body:block) => {
        $(#[$meta])*
        #[test]
        fn $name() {
            let test = concat!(module_path!(), "::", stringify!($name));
            let _slot = $crate::kernel::slot::take($crate::kernel::slot::Share::$share, test);
            if !$crate::kernel::run_test_in_real_kernel(test, &[$($kind),*]) {
                return;
            }
            $body
        }
    };
    ($(#[$meta:meta])* fn $name:ident() needs [$($kind:expr),* $(,)?] alone $body:block $($rest:tt)*) => {
        $crate::real_kernel_test!(@one Alone, $(#[$meta])* fn $name() needs [$($kind),*] $body);
        $crate::real_kernel_test!($($rest)*);
    };
    ($(#[$meta:meta])* fn $name:ident() needs [$($kind:expr),* $(,)?] $body:block $($rest:tt)*) => {
        $crate::real_kernel_test!(@one Shared, $(#[$meta])* fn $name() needs [$($kind),*] $body);
        $crate::real_kernel_test!($($rest)*);
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_crate_name_is_dropped_and_nothing_else() {
        assert_eq!(libtest_name("kernel_runner::x"), "x");
        assert_eq!(
            libtest_name("unbloat_lab::topology::tests::x"),
            "topology::tests::x"
        );
        assert_eq!(
            libtest_name(concat!(module_path!(), "::t")),
            "kernel::reexec::tests::t"
        );
        assert_eq!(libtest_name("x"), "x");
    }

    #[test]
    fn only_one_passed_test_counts_as_a_pass() {
        let one = "\nrunning 1 test\ntest x ... ok\n\ntest result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 7 filtered out; finished in 0.01s\n";
        assert_eq!(check_single_pass(0, one), Ok(()));
        assert!(check_single_pass(101, one).is_err());
        let none = "\nrunning 0 tests\n\ntest result: ok. 0 passed; 0 failed; 0 ignored; 0 measured; 8 filtered out; finished in 0.00s\n";
        assert!(check_single_pass(0, none).is_err());
        let ignored = "\nrunning 1 test\ntest x ... ignored\n\ntest result: ok. 0 passed; 0 failed; 1 ignored; 0 measured; 7 filtered out\n";
        assert!(check_single_pass(0, ignored).is_err());
        assert!(check_single_pass(0, "").is_err());
    }
}
