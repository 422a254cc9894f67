//! Files that unbloat, running as root, writes or reads at a path someone else may have chosen:
//! a results file, a log named in the config, a report the web page serves, a scratch directory
//! in `/tmp`.
//!
//! What callers can rely on:
//! - The last component of a path is never followed if it is a symbolic link (`O_NOFOLLOW`): a
//!   link planted at `/tmp/results.json` that points at `/etc/shadow` is refused, not truncated.
//!   Links further up the path are the kernel's to police: Debian turns on
//!   `fs.protected_symlinks`, so root does not follow another user's link in a sticky directory.
//! - Only regular files are opened: a FIFO would block root for ever, a device would be written
//!   to. The check is on the open descriptor (`fstat`), so nothing can be swapped in between.
//! - A file is truncated only after that check ([`create`]), and is created with the mode asked
//!   for (before the umask).
//! - [`private_dir`] makes a fresh directory with an unpredictable name, mode 0700, and fails
//!   rather than reuse one that is there: nobody can plant a directory for us in `/tmp`.
//! - [`replace`] puts a new version of a file in place atomically (a reader sees the old or the
//!   new one, whole): a file of its own in a fresh private directory beside it, with the old
//!   file's mode and owner, flushed, renamed over the name. A link at the name is refused, not
//!   followed, and the file is not touched.
//! - [`open_beneath`] reads a file named relative to a directory (a page's request) without
//!   following a link anywhere below the directory, on the descriptor it then hands back.
//! - Every error names the path and says what was wrong.

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::FromRawFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Creates `path`, or empties it if it is there, for writing. `mode` applies to a new file.
pub fn create(path: &Path, mode: u32) -> io::Result<File> {
    let file = open_regular(path, libc::O_WRONLY | libc::O_CREAT, mode)?;
    file.set_len(0).map_err(|e| named(path, "emptying", e))?;
    Ok(file)
}

/// Opens `path` for appending, creating it with `mode` if needed: a log.
pub fn append(path: &Path, mode: u32) -> io::Result<File> {
    open_regular(path, libc::O_WRONLY | libc::O_CREAT | libc::O_APPEND, mode)
}

/// Opens `path` for reading.
pub fn open(path: &Path) -> io::Result<File> {
    open_regular(path, libc::O_RDONLY, 0)
}

/// Writes `bytes` to `path` as [`create`] opens it.
pub fn write(path: &Path, bytes: impl AsRef<[u8]>, mode: u32) -> io::Result<()> {
    use io::Write;
    create(path, mode)?
        .write_all(bytes.as_ref())
        .map_err(|e| named(path, "writing", e))
}

/// Reads `path` whole, as [`open`] opens it.
pub fn read(path: &Path) -> io::Result<Vec<u8>> {
    use io::Read;
    let mut out = Vec::new();
    open(path)?
        .read_to_end(&mut out)
        .map_err(|e| named(path, "reading", e))?;
    Ok(out)
}

/// Replaces the regular file at `path` with `bytes`, atomically: a new file in a private
/// directory beside it (so no name anyone planted is written through), given the old file's
/// mode and owner, flushed, renamed over `path`, and the directory flushed so the rename lasts
/// a power cut. A link or anything but a regular file at `path` is refused and left as it was;
/// so is a missing file (the caller read the file it changes).
pub fn replace(path: &Path, bytes: impl AsRef<[u8]>) -> io::Result<()> {
    use io::Write;
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
    let old = open(path)?
        .metadata()
        .map_err(|e| named(path, "reading", e))?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let private = private_dir(dir, ".unbloat-replace")?;
    let tmp = private.join("new");
    let mode = old.mode() & 0o7777;
    let result = (|| -> io::Result<()> {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&tmp)?;
        // The umask may have narrowed the mode; the file keeps the old one, and its owner.
        f.set_permissions(std::fs::Permissions::from_mode(mode))?;
        std::os::unix::fs::fchown(&f, Some(old.uid()), Some(old.gid()))?;
        f.write_all(bytes.as_ref())?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)?;
        File::open(dir)?.sync_all()
    })();
    let _ = std::fs::remove_file(&tmp);
    let _ = std::fs::remove_dir(&private);
    result.map_err(|e| named(path, "replacing", e))
}

/// Opens `rel` below the directory `dir` for reading, one component at a time (`openat` from the
/// directory opened before it, each with `O_NOFOLLOW`): no symbolic link below `dir` is
/// followed, wherever it is in `rel`, and `..` or an absolute `rel` is refused. What is opened
/// is what is served: nothing can be swapped in between a check and a second open. A directory
/// at the end is an error of kind [`io::ErrorKind::IsADirectory`] (the caller may look inside
/// it), an empty `rel` included; `dir` itself may be a link (its owner named it).
pub fn open_beneath(dir: &Path, rel: &Path) -> io::Result<File> {
    use std::os::fd::AsRawFd;
    use std::path::Component;
    let refused = |why: &str| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{}: {why}", rel.display()),
        )
    };
    let mut names = vec![];
    for c in rel.components() {
        match c {
            Component::Normal(name) => names.push(name),
            Component::CurDir => {}
            _ => {
                return Err(refused(
                    "only names below the directory are opened (no .., no /)",
                ))
            }
        }
    }
    let mut at = open_at(None, dir, libc::O_RDONLY | libc::O_DIRECTORY)
        .map_err(|e| named(dir, "opening", e))?;
    let Some((last, above)) = names.split_last() else {
        return Err(io::Error::new(
            io::ErrorKind::IsADirectory,
            format!("{}: a directory", dir.display()),
        ));
    };
    let link = |e: io::Error| match e.raw_os_error() {
        Some(libc::ELOOP) => refused("a symbolic link on the way; links are not followed here"),
        Some(libc::ENOTDIR) => io::Error::new(
            io::ErrorKind::NotFound,
            format!("{}: not found", rel.display()),
        ),
        _ => named(rel, "opening", e),
    };
    for name in above {
        // O_PATH: nothing is opened for reading on the way (a device's open may do something),
        // and with O_NOFOLLOW a link is opened as itself, so fstat tells it from a file.
        let next = open_at(
            Some(at.as_raw_fd()),
            Path::new(name),
            libc::O_PATH | libc::O_NOFOLLOW,
        )
        .map_err(link)?;
        let kind = next
            .metadata()
            .map_err(|e| named(rel, "reading", e))?
            .file_type();
        if kind.is_symlink() {
            return Err(link(io::Error::from_raw_os_error(libc::ELOOP)));
        }
        if !kind.is_dir() {
            return Err(link(io::Error::from_raw_os_error(libc::ENOTDIR)));
        }
        at = next;
    }
    let flags = libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY;
    let file = open_at(Some(at.as_raw_fd()), Path::new(last), flags).map_err(link)?;
    let meta = file.metadata().map_err(|e| named(rel, "reading", e))?;
    if meta.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::IsADirectory,
            format!("{}: a directory", rel.display()),
        ));
    }
    if !meta.is_file() {
        return Err(not_regular(rel));
    }
    blocking(&file);
    Ok(file)
}

/// `openat(at, path, flags | O_CLOEXEC)`, or `open` without `at`; the raw error.
fn open_at(at: Option<i32>, path: &Path, flags: i32) -> io::Result<File> {
    let c = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a path with a NUL byte"))?;
    // SAFETY: c is a valid NUL-terminated string, `at` a descriptor we hold open.
    let fd = unsafe {
        libc::openat(
            at.unwrap_or(libc::AT_FDCWD),
            c.as_ptr(),
            flags | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd is a descriptor we own, just opened.
    Ok(unsafe { File::from_raw_fd(fd) })
}

/// Back to blocking: reads and writes of a regular file do not care, but callers may hand
/// the file to code that does.
fn blocking(file: &File) {
    use std::os::fd::AsRawFd;
    let fd = file.as_raw_fd();
    // SAFETY: fcntl on our own descriptor.
    unsafe {
        let fl = libc::fcntl(fd, libc::F_GETFL);
        libc::fcntl(fd, libc::F_SETFL, fl & !libc::O_NONBLOCK);
    }
}

/// Makes `dir` and the directories above it that are missing (mode 0755), and checks that
/// `dir` is a directory and not a link to one: a results directory the user named.
pub fn ensure_dir(dir: &Path) -> io::Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| named(dir, "creating directory", e))?;
    let meta = std::fs::symlink_metadata(dir).map_err(|e| named(dir, "reading", e))?;
    if !meta.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{} is a symbolic link, not a directory; unbloat writes only into real directories",
                dir.display()
            ),
        ));
    }
    Ok(())
}

/// A new directory `<parent>/<prefix>-<random>`, mode 0700, that did not exist before.
pub fn private_dir(parent: &Path, prefix: &str) -> io::Result<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    for _ in 0..16 {
        let mut r = [0u8; 8];
        getrandom::getrandom(&mut r).map_err(io::Error::other)?;
        let p = parent.join(format!("{prefix}-{:016x}", u64::from_ne_bytes(r)));
        match std::fs::DirBuilder::new().mode(0o700).create(&p) {
            Ok(()) => return Ok(p),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(named(&p, "creating directory", e)),
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AlreadyExists,
        format!("{}: no free name for a directory", parent.display()),
    ))
}

fn open_regular(path: &Path, flags: i32, mode: u32) -> io::Result<File> {
    let c = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a path with a NUL byte"))?;
    // O_NONBLOCK: opening a FIFO with no writer would otherwise wait for ever; it is refused
    // below, and a regular file ignores the flag.
    let all = flags | libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK | libc::O_NOCTTY;
    // SAFETY: c is a valid NUL-terminated string; open has no other preconditions.
    let fd = unsafe { libc::open(c.as_ptr(), all, mode as libc::c_uint) };
    if fd < 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::ELOOP) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "{} is a symbolic link; unbloat does not open files through links (name the file itself)",
                    path.display()
                ),
            ));
        }
        // ENXIO: a FIFO opened to write, non-blocking, with nobody reading it.
        if e.raw_os_error() == Some(libc::ENXIO) {
            return Err(not_regular(path));
        }
        return Err(named(path, "opening", e));
    }
    // SAFETY: fd is a descriptor we own, just opened.
    let file = unsafe { File::from_raw_fd(fd) };
    let meta = file.metadata().map_err(|e| named(path, "reading", e))?;
    if !meta.is_file() {
        return Err(not_regular(path));
    }
    blocking(&file);
    Ok(file)
}

fn not_regular(path: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!(
            "{} is not a regular file (a directory, FIFO, socket or device); unbloat only uses regular files",
            path.display()
        ),
    )
}

fn named(path: &Path, action: &str, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("{action} {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{symlink, MetadataExt};

    fn scratch(tag: &str) -> PathBuf {
        // Under target/, not /tmp: the stop hook counts what tests leave in /tmp.
        let base = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../target/tmp"));
        std::fs::create_dir_all(&base).unwrap();
        private_dir(&base, tag).unwrap()
    }

    #[test]
    fn a_link_at_the_path_is_refused_and_its_target_untouched() {
        let dir = scratch("link");
        let victim = dir.join("victim");
        std::fs::write(&victim, "precious").unwrap();
        let link = dir.join("results.json");
        symlink(&victim, &link).unwrap();
        for err in [
            create(&link, 0o644).unwrap_err(),
            append(&link, 0o644).unwrap_err(),
            open(&link).unwrap_err(),
            write(&link, "x", 0o644).unwrap_err(),
        ] {
            assert!(err.to_string().contains("symbolic link"), "{err}");
            assert!(err.to_string().contains("results.json"), "{err}");
        }
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
        // A dangling link is not created through either.
        let dangling = dir.join("log");
        symlink(dir.join("made-by-root"), &dangling).unwrap();
        assert!(append(&dangling, 0o644).is_err());
        assert!(!dir.join("made-by-root").exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_fifo_is_refused_at_once_and_a_file_is_emptied_only_after_the_check() {
        let dir = scratch("fifo");
        let fifo = dir.join("fifo");
        let c = CString::new(fifo.as_os_str().as_bytes()).unwrap();
        // SAFETY: a valid path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let err = create(&fifo, 0o644).unwrap_err();
        assert!(err.to_string().contains("not a regular file"), "{err}");
        assert!(open(&dir)
            .unwrap_err()
            .to_string()
            .contains("not a regular file"));

        let file = dir.join("out");
        write(&file, "a long first version", 0o600).unwrap();
        assert_eq!(std::fs::metadata(&file).unwrap().mode() & 0o777, 0o600);
        write(&file, "short", 0o644).unwrap();
        assert_eq!(read(&file).unwrap(), b"short");
        use io::Write;
        append(&file, 0o644).unwrap().write_all(b"+more").unwrap();
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "short+more");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn open_beneath_follows_no_link_below_the_directory() {
        let dir = scratch("beneath");
        let base = dir.join("base");
        std::fs::create_dir_all(base.join("a/b")).unwrap();
        std::fs::write(base.join("a/b/f"), "inside").unwrap();
        std::fs::write(dir.join("secret"), "outside").unwrap();
        symlink(dir.join("secret"), base.join("a/out")).unwrap();
        symlink(base.join("a/b/f"), base.join("a/in")).unwrap();
        symlink(&dir, base.join("a/up")).unwrap();
        symlink(base.join("a/b"), base.join("a/bdir")).unwrap();
        let read = |rel: &str| {
            use io::Read;
            let mut s = String::new();
            open_beneath(&base, Path::new(rel))?.read_to_string(&mut s)?;
            Ok::<_, io::Error>(s)
        };
        assert_eq!(read("a/b/f").unwrap(), "inside");
        assert_eq!(read("./a/b/f").unwrap(), "inside");
        for rel in [
            "a/out",
            "a/in",
            "a/up/secret",
            "a/bdir/f",
            "../secret",
            "a/../../secret",
            "/etc/passwd",
        ] {
            let err = read(rel).unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "{rel}: {err}");
        }
        assert_eq!(
            read("a/nothing").unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
        assert_eq!(read("a/b/f/x").unwrap_err().kind(), io::ErrorKind::NotFound);
        assert_eq!(read("a/b").unwrap_err().kind(), io::ErrorKind::IsADirectory);
        assert_eq!(read("").unwrap_err().kind(), io::ErrorKind::IsADirectory);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_private_dir_is_new_and_ours_alone_and_ensure_dir_refuses_a_link() {
        let dir = scratch("dirs");
        let a = private_dir(&dir, "work").unwrap();
        let b = private_dir(&dir, "work").unwrap();
        assert_ne!(a, b);
        assert_eq!(std::fs::metadata(&a).unwrap().mode() & 0o777, 0o700);
        let nested = dir.join("x/y");
        ensure_dir(&nested).unwrap();
        ensure_dir(&nested).unwrap();
        let link = dir.join("linked");
        symlink(&a, &link).unwrap();
        assert!(ensure_dir(&link)
            .unwrap_err()
            .to_string()
            .contains("symbolic link"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn replace_swaps_the_file_whole_keeps_its_mode_and_refuses_a_link() {
        use std::os::unix::fs::PermissionsExt;
        let dir = scratch("replace");
        let file = dir.join("unbloat.toml");
        std::fs::write(&file, "old").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o640)).unwrap();
        let before = std::fs::metadata(&file).unwrap().ino();
        replace(&file, "new").unwrap();
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "new");
        let meta = std::fs::metadata(&file).unwrap();
        assert_eq!(meta.mode() & 0o777, 0o640);
        assert_ne!(meta.ino(), before, "a new file renamed over the old one");
        // Nothing left beside it.
        let left: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
        assert_eq!(left.len(), 1, "{left:?}");

        let victim = dir.join("victim");
        std::fs::write(&victim, "precious").unwrap();
        let link = dir.join("link.toml");
        symlink(&victim, &link).unwrap();
        let err = replace(&link, "x").unwrap_err();
        assert!(err.to_string().contains("symbolic link"), "{err}");
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert!(replace(&dir.join("missing"), "x").is_err());
        assert!(!dir.join("missing").exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
