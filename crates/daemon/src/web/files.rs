//! Files the page links to, served read-only from one directory each: the runs' output
//! (`runs/` in the run directory) and the lab reports (`--reports DIR`).
//!
//! Only what lies under the directory is served: a path with `..`, an absolute path, or one
//! whose real location (symbolic links followed) is outside the directory is refused, before
//! anything is opened. A served file cannot act as the page: it gets
//! `Content-Security-Policy: sandbox` (a unique origin, no scripts), so a report's HTML never
//! reaches the token the page keeps in sessionStorage.

use std::path::{Component, Path, PathBuf};
use std::time::UNIX_EPOCH;

use axum::body::Body;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

/// No report file is near this; a larger one is not served (it would be held in memory whole).
const MAX_FILE: u64 = 32 << 20;
/// How deep [`reports`] looks for `index.html` below the reports directory (a lab writes
/// `DIR/NAME/index.html`; one level more allows grouping by date).
const REPORT_DEPTH: usize = 2;
/// The most reports listed, newest first.
const MAX_REPORTS: usize = 200;

/// Why a path is not served.
#[derive(Debug, PartialEq, Eq)]
pub enum Refused {
    /// `..`, an absolute path, or a link out of the directory.
    Outside,
    NotFound,
}

/// The file `rel` names under `base`: a directory means its `index.html`.
pub fn resolve(base: &Path, rel: &str) -> Result<PathBuf, Refused> {
    let mut path = base.to_path_buf();
    for c in Path::new(rel).components() {
        match c {
            Component::Normal(name) => path.push(name),
            Component::CurDir => {}
            Component::ParentDir | Component::RootDir | Component::Prefix(_) => {
                return Err(Refused::Outside)
            }
        }
    }
    let base = base.canonicalize().map_err(|_| Refused::NotFound)?;
    let mut real = path.canonicalize().map_err(|_| Refused::NotFound)?;
    if !real.starts_with(&base) {
        return Err(Refused::Outside);
    }
    if real.is_dir() {
        real = real
            .join("index.html")
            .canonicalize()
            .map_err(|_| Refused::NotFound)?;
        if !real.starts_with(&base) {
            return Err(Refused::Outside);
        }
    }
    Ok(real)
}

/// The answer to `GET PREFIX/rel` for the directory `base` (blocking: it reads the file).
pub fn answer(base: Option<&Path>, rel: &str) -> Response {
    let Some(base) = base else {
        return (StatusCode::NOT_FOUND, "no such directory is served").into_response();
    };
    let path = match resolve(base, rel) {
        Ok(p) => p,
        Err(Refused::Outside) => {
            return (
                StatusCode::FORBIDDEN,
                "only files under the served directory are served",
            )
                .into_response()
        }
        Err(Refused::NotFound) => return (StatusCode::NOT_FOUND, "no such file").into_response(),
    };
    match std::fs::metadata(&path) {
        Ok(m) if m.len() > MAX_FILE => {
            return (
                StatusCode::PAYLOAD_TOO_LARGE,
                "the file is too large to serve",
            )
                .into_response()
        }
        Ok(m) if m.is_file() => {}
        _ => return (StatusCode::NOT_FOUND, "no such file").into_response(),
    }
    match std::fs::read(&path) {
        Ok(bytes) => Response::builder()
            .header(header::CONTENT_TYPE, content_type(&path))
            .header(header::CONTENT_SECURITY_POLICY, "sandbox")
            .header(header::X_CONTENT_TYPE_OPTIONS, "nosniff")
            .body(Body::from(bytes))
            .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response()),
        Err(e) => (StatusCode::NOT_FOUND, format!("cannot read it: {e}")).into_response(),
    }
}

pub fn content_type(path: &Path) -> &'static str {
    match path.extension().and_then(|e| e.to_str()).unwrap_or("") {
        "html" | "htm" => "text/html; charset=utf-8",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "json" => "application/json",
        "css" => "text/css; charset=utf-8",
        "txt" | "toml" | "log" | "csv" => "text/plain; charset=utf-8",
        "gz" => "application/gzip",
        _ => "application/octet-stream",
    }
}

/// One report directory: where `index.html` is, relative to the reports directory.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Report {
    pub name: String,
    /// When its index.html was written (Unix seconds).
    pub modified_unix: u64,
}

/// The directories under `base` (itself included) that hold an `index.html`, newest first.
pub fn reports(base: &Path) -> Vec<Report> {
    let mut found = vec![];
    let mut dirs = vec![(base.to_path_buf(), 0usize)];
    while let Some((dir, depth)) = dirs.pop() {
        let index = dir.join("index.html");
        if let Ok(m) = std::fs::metadata(&index) {
            let name = dir
                .strip_prefix(base)
                .map(|p| p.to_string_lossy().into_owned())
                .unwrap_or_default();
            let modified_unix = m
                .modified()
                .ok()
                .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_secs());
            found.push(Report {
                name,
                modified_unix,
            });
        }
        if depth >= REPORT_DEPTH {
            continue;
        }
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            // file_type() does not follow links: a link out of the directory is not walked.
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                dirs.push((entry.path(), depth + 1));
            }
        }
    }
    found.sort_by(|a, b| {
        b.modified_unix
            .cmp(&a.modified_unix)
            .then(a.name.cmp(&b.name))
    });
    found.truncate(MAX_REPORTS);
    found
}

/// The files a run left in `dir` that the page links to (reports, plots, results), by name.
pub fn outputs(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| {
            [".html", ".svg", ".json", ".toml", ".png"]
                .iter()
                .any(|ext| n.ends_with(ext))
        })
        .collect();
    // index.html first: it is the report; the rest by name.
    names.sort_by_key(|n| (n != "index.html", n.clone()));
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree() -> crate::web::scratch::Scratch {
        let scratch = crate::web::scratch::Scratch::new("files");
        let dir = scratch.path();
        std::fs::create_dir_all(dir.join("base/lab1")).unwrap();
        std::fs::create_dir_all(dir.join("base/2026/lab2")).unwrap();
        std::fs::write(dir.join("base/lab1/index.html"), "one").unwrap();
        std::fs::write(dir.join("base/lab1/a.svg"), "<svg/>").unwrap();
        std::fs::write(dir.join("base/2026/lab2/index.html"), "two").unwrap();
        std::fs::write(dir.join("secret"), "no").unwrap();
        std::os::unix::fs::symlink(dir.join("secret"), dir.join("base/lab1/link")).unwrap();
        scratch
    }

    #[test]
    fn only_files_under_the_directory_resolve() {
        let scratch = tree();
        let base = scratch.path().join("base");
        assert!(resolve(&base, "lab1/a.svg")
            .unwrap()
            .ends_with("lab1/a.svg"));
        assert!(resolve(&base, "lab1").unwrap().ends_with("lab1/index.html"));
        assert!(resolve(&base, "./lab1/index.html").is_ok());
        assert_eq!(resolve(&base, "../secret"), Err(Refused::Outside));
        assert_eq!(resolve(&base, "lab1/../../secret"), Err(Refused::Outside));
        assert_eq!(resolve(&base, "/etc/passwd"), Err(Refused::Outside));
        assert_eq!(resolve(&base, "lab1/link"), Err(Refused::Outside));
        assert_eq!(resolve(&base, "lab1/nothing"), Err(Refused::NotFound));
    }

    #[test]
    fn reports_are_the_directories_with_an_index() {
        let scratch = tree();
        let dir = scratch.path();
        let mut names: Vec<String> = reports(&dir.join("base"))
            .into_iter()
            .map(|r| r.name)
            .collect();
        names.sort();
        assert_eq!(names, ["2026/lab2", "lab1"]);
        assert_eq!(outputs(&dir.join("base/lab1")), ["index.html", "a.svg"]);
    }
}
