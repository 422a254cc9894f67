//! Whether root may run or read what is at a path: no symlink anywhere on it, and nobody but root
//! (or us) can change it, down every directory from `/`, and for a directory everything under it.
//! The kernel the lab boots and any script run as root must pass this.

use std::path::Path;

/// Root may run what is at `path`: it and every directory above it are no symlinks, and are
/// owned by root (or by us) and writable by nobody else, as sshd's StrictModes asks of a key.
/// One exception, as there: a directory above it that is root's and sticky (`/tmp`, mode 1777),
/// in which nobody can rename or remove what another owns.
pub fn trusted(path: &Path) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    let path = std::path::absolute(path).map_err(|e| format!("{}: {e}", path.display()))?;
    for (i, p) in path.ancestors().enumerate() {
        let meta = std::fs::symlink_metadata(p).map_err(|e| format!("{}: {e}", p.display()))?;
        if meta.file_type().is_symlink() {
            return Err(format!(
                "{} is a symbolic link; it is not used",
                p.display()
            ));
        }
        let sticky_root_dir = i > 0 && meta.uid() == 0 && meta.mode() & 0o1000 != 0;
        if meta.uid() != 0 && meta.uid() != me || meta.mode() & 0o022 != 0 && !sticky_root_dir {
            return Err(format!(
                "{} is owned by uid {} with mode {:o}: it must be root's and writable by nobody \
                 else to be run",
                p.display(),
                meta.uid(),
                meta.mode() & 0o7777
            ));
        }
    }
    Ok(())
}

/// Root may run what `dir` holds: `dir` and everything under it pass [`trusted`] (no symbolic
/// link, nothing anyone but root or us may change, down from `/`). For the sqm-scripts
/// `unbloat config import-sqm --check` runs, and the test bench's vendored peers.
pub fn trusted_tree(dir: &Path) -> Result<(), String> {
    trusted(dir)?;
    let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for entry in entries {
        let path = entry.map_err(|e| format!("{}: {e}", dir.display()))?.path();
        // A symbolic link is refused here, before it could be followed.
        trusted(&path)?;
        if std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir()) {
            trusted_tree(&path)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kernel_in_a_writable_or_linked_place_is_not_trusted() {
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &Path, m: u32| std::fs::set_permissions(p, PermissionsExt::from_mode(m));
        // A fresh 0700 directory of ours under /tmp, removed however the test ends.
        struct Dir(std::path::PathBuf);
        impl Drop for Dir {
            fn drop(&mut self) {
                let _ = std::fs::remove_dir_all(&self.0);
            }
        }
        impl Dir {
            fn path(&self) -> &Path {
                &self.0
            }
        }
        let tmp = std::path::absolute(std::env::temp_dir()).unwrap();
        let dir = Dir(unbloat_safefs::private_dir(&tmp, "unbloat-trust").unwrap());
        let kernel = dir.path().join("linux");
        std::fs::write(&kernel, "").unwrap();
        mode(&kernel, 0o755).unwrap();
        // Our 0700 directory in the sticky /tmp: nobody else can change or replace it.
        assert_eq!(trusted(&kernel), Ok(()));
        mode(dir.path(), 0o775).unwrap();
        let err = trusted(&kernel).unwrap_err();
        assert!(err.contains("writable by nobody else"), "{err}");
        assert!(err.contains(&dir.path().display().to_string()), "{err}");
        // Sticky is no excuse for the file itself.
        mode(dir.path(), 0o700).unwrap();
        mode(&kernel, 0o1777).unwrap();
        assert!(trusted(&kernel).unwrap_err().contains("mode 1777"));
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&kernel, &link).unwrap();
        assert!(trusted(&link).unwrap_err().contains("symbolic link"));
        assert_eq!(trusted(Path::new("/usr/bin")), Ok(()));
    }

    /// A tree root may run must not hold anything another user could change or redirect, at any
    /// depth.
    #[test]
    fn a_tree_with_a_writable_file_or_a_link_deep_inside_is_not_trusted() {
        use std::os::unix::fs::PermissionsExt;
        use std::path::PathBuf;
        // Under the build's own directory (the repository's target/), so that what it proves
        // does not hang on /tmp's sticky bit.
        let base = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../target/tmp")
            .join(format!("tree-trust-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        std::fs::create_dir_all(base.join("src/deep")).expect("dirs");
        let base = std::fs::canonicalize(&base).expect("canonical");
        // Removed however the test ends.
        struct Gone(PathBuf);
        impl Drop for Gone {
            fn drop(&mut self) {
                let _ = std::fs::remove_dir_all(&self.0);
            }
        }
        let _gone = Gone(base.clone());
        let file = base.join("src/deep/script.sh");
        std::fs::write(&file, "#!/bin/sh\n").expect("write");
        let mode = |p: &Path, m: u32| {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).expect("chmod")
        };
        for d in [&base, &base.join("src"), &base.join("src/deep")] {
            mode(d, 0o755);
        }
        mode(&file, 0o644);
        // The target directory must itself be one root may run from for the rest to mean
        // anything (a checkout in a group-writable directory is not).
        if let Err(e) = trusted(&base) {
            eprintln!("skipped: {e}");
            return;
        }
        assert_eq!(trusted_tree(&base), Ok(()));
        mode(&file, 0o664);
        let err = trusted_tree(&base).unwrap_err();
        assert!(err.contains("deep/script.sh"), "{err}");
        assert!(err.contains("writable by nobody else"), "{err}");
        mode(&file, 0o644);
        mode(&base.join("src"), 0o775);
        let err = trusted_tree(&base).unwrap_err();
        assert!(err.contains("/src is owned by"), "{err}");
        mode(&base.join("src"), 0o755);
        std::os::unix::fs::symlink("/bin/sh", base.join("src/deep/link")).expect("link");
        let err = trusted_tree(&base).unwrap_err();
        assert!(err.contains("deep/link is a symbolic link"), "{err}");
    }
}
