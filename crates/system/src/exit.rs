//! What a failed command exits with, shared by the two binaries (`unbloat`, `unbloat-lab`): the
//! README's exit status table, 1 for a failure and 2 for invalid input. (`unbloat-lab` also
//! counts a machine whose kernels lack what the work needs as invalid input, nothing being
//! changed either way: it knows the test bench's kernel errors, this crate does not.)

/// An error with the exit status it deserves.
pub struct Failure {
    pub code: i32,
    pub error: anyhow::Error,
}

impl<E: Into<anyhow::Error>> From<E> for Failure {
    /// Exit status 1.
    fn from(e: E) -> Failure {
        Failure {
            code: 1,
            error: e.into(),
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
