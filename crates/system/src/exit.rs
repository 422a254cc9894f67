//! What a failed command exits with, shared by the two binaries (`unbloat`, `unbloat-lab`): the
//! README's exit status table, 1 for a failure and 2 for invalid input, where a machine whose
//! kernels lack what the work needs counts as invalid input (nothing was changed either way).

use crate::kernel::KernelError;

/// An error with the exit status it deserves.
pub struct Failure {
    pub code: i32,
    pub error: anyhow::Error,
}

impl<E: Into<anyhow::Error>> From<E> for Failure {
    /// Exit status 1, or 2 when the cause is that no kernel here can do the work (what the
    /// machine lacks, as for any invalid input: nothing was changed).
    fn from(e: E) -> Failure {
        let error = e.into();
        let no_kernel = error.chain().any(|c| {
            c.downcast_ref::<KernelError>()
                .is_some_and(|k| k.no_kernel())
        });
        Failure {
            code: if no_kernel { 2 } else { 1 },
            error,
        }
    }
}

impl Failure {
    /// Prints `PROGRAM: error: ...` and each cause that says something new on stderr, then
    /// exits with the failure's status: how both binaries end on an error.
    pub fn exit(self, program: &str) -> ! {
        eprintln!("{program}: error: {}", self.error);
        // Errors that display their source's message themselves would repeat it: print a
        // cause only when it says something new.
        let mut last = self.error.to_string();
        for cause in self.error.chain().skip(1) {
            let text = cause.to_string();
            if !last.contains(&text) {
                eprintln!("  caused by: {text}");
            }
            last = text;
        }
        std::process::exit(self.code);
    }
}

/// Marks an error as invalid input (exit 2).
pub fn invalid(e: impl Into<anyhow::Error>) -> Failure {
    Failure {
        code: 2,
        error: e.into(),
    }
}
