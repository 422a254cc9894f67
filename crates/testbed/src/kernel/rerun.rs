//! A command that must run in a kernel with every qdisc re-runs itself there: the same program
//! with the same arguments, inside User-Mode Linux, plus a marker that tells the copy it is the
//! one inside.
//!
//! The arguments are the process's own (`std::env::args_os()`), forwarded unchanged, never a
//! list rebuilt from the parsed flags: such a list had to name every flag again, in five places,
//! and a flag added to a command but not to its list was silently dropped inside the guest. The
//! guest runs in the caller's current directory and sees the host's files ([`super::Kernel::run`]),
//! so relative paths mean the same there. What a copy genuinely needs said differently (a
//! marker, or what the outer process found so the copy need not look again) is appended by the
//! caller as `extra`, and each caller says why.

use std::ffi::OsString;
use std::path::Path;

use super::KernelError;

/// The argument vector that runs this very process again: this executable by its path
/// (`argv[0]` may be a bare name found on `PATH`, or a path relative to somewhere else), then
/// every argument it was given, unchanged and in order, then `extra`.
pub fn own_argv(extra: &[String]) -> Result<Vec<String>, KernelError> {
    let exe = std::env::current_exe().map_err(|source| KernelError::Io {
        what: "cannot find this program to run it again".into(),
        source,
    })?;
    argv_of(&exe, std::env::args_os().skip(1), extra)
}

/// [`own_argv`] for a given executable and arguments.
fn argv_of(
    exe: &Path,
    args: impl IntoIterator<Item = OsString>,
    extra: &[String],
) -> Result<Vec<String>, KernelError> {
    // Kernel::run takes text (the UML guest's command line is a shell script it writes).
    let text = |s: OsString| {
        s.into_string().map_err(|s| KernelError::Io {
            what: format!("cannot pass {s:?} to the copy in another kernel"),
            source: std::io::Error::from(std::io::ErrorKind::InvalidData),
        })
    };
    let mut argv = vec![text(exe.as_os_str().to_owned())?];
    for arg in args {
        argv.push(text(arg)?);
    }
    argv.extend(extra.iter().cloned());
    Ok(argv)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::ffi::OsStringExt;

    #[test]
    fn every_argument_is_forwarded_unchanged_and_the_marker_follows() {
        let given = [
            "bench",
            "fair",
            "--runs",
            "2",
            "--setups=sqm-default",
            "--json",
        ];
        let argv = argv_of(
            Path::new("/usr/bin/unbloat-lab"),
            given.iter().map(OsString::from),
            &["--inside".into()],
        )
        .expect("text");
        assert_eq!(argv[0], "/usr/bin/unbloat-lab");
        assert_eq!(argv[1..=given.len()], given);
        assert_eq!(argv.last().map(String::as_str), Some("--inside"));
        assert_eq!(argv.len(), given.len() + 2);
    }

    #[test]
    fn an_argument_that_is_not_text_is_an_error_not_a_changed_argument() {
        let bad = OsString::from_vec(vec![b'-', 0xff]);
        let err = argv_of(Path::new("/x"), [bad], &[]).expect_err("refused");
        assert!(err.to_string().contains("cannot pass"), "{err}");
    }

    #[test]
    fn this_process_is_run_by_its_path() {
        let argv = own_argv(&[]).expect("own argv");
        let exe = std::env::current_exe().expect("exe");
        assert_eq!(Path::new(&argv[0]), exe);
        assert_eq!(argv.len(), std::env::args_os().count());
    }
}
