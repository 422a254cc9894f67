//! Runs a command in a kernel that has the given qdiscs (the host's, or User-Mode Linux), with its
//! output streamed, and exits with its status. Used by `fixtures/tc/capture.sh`.
//!
//! ```text
//! cargo run -p unbloat-testbed --example in_kernel -- cake,htb -- sh script.sh ARGS...
//! ```

use std::process::ExitCode;
use std::time::Duration;

use unbloat_testbed::kernel::{GuestOptions, Kernel};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (needs, argv) = match args.split_first() {
        Some((needs, rest)) if rest.first().map(String::as_str) == Some("--") && rest.len() > 1 => {
            (
                needs
                    .split(',')
                    .filter(|s| !s.is_empty())
                    .collect::<Vec<_>>(),
                rest[1..].to_vec(),
            )
        }
        _ => {
            eprintln!("usage: in_kernel QDISC[,QDISC...] -- PROGRAM [ARGS...]");
            return ExitCode::from(2);
        }
    };
    let kernel = match Kernel::detect(&needs) {
        Ok(kernel) => kernel,
        Err(e) => {
            eprintln!("in_kernel: {e}");
            return ExitCode::from(1);
        }
    };
    eprintln!("in_kernel: running in the {} kernel", kernel.describe());
    let opts = GuestOptions {
        stream: true,
        timeout: Duration::from_secs(1800),
        ..GuestOptions::default()
    };
    match kernel.run(&argv, &opts) {
        Ok(out) => ExitCode::from(u8::try_from(out.status).unwrap_or(1)),
        Err(e) => {
            eprintln!("in_kernel: {e}");
            ExitCode::from(1)
        }
    }
}
