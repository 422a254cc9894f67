//! Where the lab, lab-hosts and the benchmarks find the real peers they compare unbloat with:
//! the copies vendored in the source tree's `third_party/` (third_party/README.md), at a path
//! fixed when this program was built, and used only when root may run what they hold. Nothing
//! is looked for above the current directory or the binary: a tree anyone can write (/tmp) could
//! plant a peer there, and these run as root. `--sqm-scripts DIR` and `--cake-autorate DIR`
//! name others.

use std::path::{Component, Path, PathBuf};

/// sqm-scripts (tohojo/sqm-scripts), the directory with `src/start-sqm`.
pub const SQM_SCRIPTS: &str = "sqm-scripts";
/// cake-autorate (lynxthecat/cake-autorate), the directory with `cake-autorate.sh`.
pub const CAKE_AUTORATE: &str = "cake-autorate";

/// `third_party/NAME` in the source tree this program was built from, without its `..`.
pub fn vendored(name: &str) -> PathBuf {
    let dir = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../third_party")).join(name);
    let mut out = PathBuf::new();
    for c in dir.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            c => out.push(c),
        }
    }
    out
}

/// The vendored copy of peer `name` ([`vendored`]) when it is there and root may run what it
/// holds ([`trusted_tree`]); else why not, naming the path.
pub fn peer_dir(name: &str) -> Result<PathBuf, String> {
    let dir = vendored(name);
    if !dir.is_dir() {
        return Err(format!(
            "{}: not there (the source tree this unbloat was built from has no copy of {name})",
            dir.display()
        ));
    }
    trusted_tree(&dir)?;
    Ok(dir)
}

/// Root may run what `dir` holds: `dir` and everything under it pass
/// [`crate::trust::trusted`] (no symbolic link, nothing anyone but root or us may
/// change, down from `/`).
pub fn trusted_tree(dir: &Path) -> Result<(), String> {
    crate::trust::trusted(dir)?;
    let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for entry in entries {
        let path = entry.map_err(|e| format!("{}: {e}", dir.display()))?.path();
        // A symbolic link is refused here, before it could be followed.
        crate::trust::trusted(&path)?;
        if std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir()) {
            trusted_tree(&path)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn the_vendored_peers_are_found_in_the_source_tree_and_trusted() {
        let sqm = vendored(SQM_SCRIPTS);
        assert!(sqm.is_absolute(), "{}", sqm.display());
        assert!(
            !sqm.components().any(|c| c == Component::ParentDir),
            "{}",
            sqm.display()
        );
        assert!(
            sqm.ends_with("third_party/sqm-scripts"),
            "{}",
            sqm.display()
        );
        assert_eq!(
            sqm.parent().and_then(Path::parent),
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .parent()
                .and_then(Path::parent)
        );
        assert_eq!(peer_dir(SQM_SCRIPTS), Ok(sqm.clone()));
        assert!(sqm.join("src/start-sqm").is_file());
        let cake = peer_dir(CAKE_AUTORATE).expect("third_party/cake-autorate");
        assert!(cake.join("cake-autorate.sh").is_file());
        let err = peer_dir("no-such-peer").unwrap_err();
        assert!(err.contains("third_party/no-such-peer: not there"), "{err}");
    }

    /// A tree root may run must not hold anything another user could change or redirect, at any
    /// depth.
    #[test]
    fn a_tree_with_a_writable_file_or_a_link_deep_inside_is_not_trusted() {
        // Under the build's own directory (the repository's target/), so that what it proves
        // does not hang on /tmp's sticky bit.
        let base = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../target/tmp")
            .join(format!("peer-trust-{}", std::process::id()));
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
        if let Err(e) = crate::trust::trusted(&base) {
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
