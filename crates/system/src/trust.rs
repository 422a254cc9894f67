//! Whether root may run or read what is at a path: no symlink anywhere on it, and nobody but root
//! (or us) can change it, down every directory from `/`. The kernel the lab boots and any script
//! run as root must pass this.

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
}
