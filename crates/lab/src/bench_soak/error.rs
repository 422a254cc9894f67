//! The soak's one error: what failed, and why (the command's, the kernel's or the daemon's
//! words). Its own module, so that the far side and the run share it without importing each
//! other.

#[derive(Debug, thiserror::Error)]
pub enum SoakError {
    #[error("{what}: {why}")]
    Failed { what: String, why: String },
}

pub(crate) fn failed(what: impl Into<String>, why: impl std::fmt::Display) -> SoakError {
    SoakError::Failed {
        what: what.into(),
        why: why.to_string(),
    }
}
