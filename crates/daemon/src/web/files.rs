//! Files the page links to, served read-only from one directory each: the runs' output
//! (`runs/` in the run directory) and the lab reports (`--reports DIR`).
//!
//! Only what lies under the directory is served: a path with `..`, an absolute path, or one
//! with a symbolic link anywhere below the directory is refused. The file is opened once and
//! served from that descriptor, so a link swapped in after a check is never followed (issue 36). A served file cannot act as the page: it gets
//! `Content-Security-Policy: sandbox` (a unique origin, no scripts), so a report's HTML never
//! reaches the token the page keeps in sessionStorage.

use std::fs::File;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use serde::Serialize;

use crate::http::Response;

/// No report file is near this; a larger one is not served. It is never held in memory (the
/// server sends it a chunk at a time, [`crate::http::CHUNK`]); the cap bounds how long one
/// answer may take ([`crate::http::Limits::min_rate`]).
const MAX_FILE: u64 = 32 << 20;
/// How deep [`reports`] looks for `index.html` below the reports directory (a lab writes
/// `DIR/NAME/index.html`; one level more allows grouping by date).
const REPORT_DEPTH: usize = 2;
/// The most reports listed, newest first.
const MAX_REPORTS: usize = 200;

/// Why a path is not served.
#[derive(Debug, PartialEq, Eq)]
pub enum Refused {
    /// `..`, an absolute path, or a symbolic link anywhere below the directory.
    Outside,
    NotFound,
    TooLarge,
}

/// The file `rel` names under `base`, open, and its length: a directory means its `index.html`. Opened once,
/// a component at a time, links refused on every one ([`unbloat_safefs::open_beneath`]); what
/// is checked (a regular file, its size) is the descriptor served, so nothing swapped in after
/// the check is served. The name the file is served under (its type comes from it).
pub fn open(base: &Path, rel: &str) -> Result<(File, u64, PathBuf), Refused> {
    let mut rel = PathBuf::from(rel);
    let opened = match unbloat_safefs::open_beneath(base, &rel) {
        Err(e) if e.kind() == ErrorKind::IsADirectory => {
            rel.push("index.html");
            unbloat_safefs::open_beneath(base, &rel)
        }
        other => other,
    };
    let file = opened.map_err(|e| match e.kind() {
        ErrorKind::InvalidInput => Refused::Outside,
        _ => Refused::NotFound,
    })?;
    match file.metadata() {
        Ok(m) if m.len() > MAX_FILE => Err(Refused::TooLarge),
        Ok(m) => Ok((file, m.len(), rel)),
        Err(_) => Err(Refused::NotFound),
    }
}

/// The answer to `GET PREFIX/rel` for the directory `base`: the file, open, to be sent a chunk
/// at a time.
pub fn answer(base: Option<&Path>, rel: &str) -> Response {
    let Some(base) = base else {
        return Response::text(404, "no such directory is served");
    };
    let (file, len, path) = match open(base, rel) {
        Ok(opened) => opened,
        Err(Refused::Outside) => {
            return Response::text(
                403,
                "only files under the served directory are served, and no links",
            )
        }
        Err(Refused::TooLarge) => return Response::text(413, "the file is too large to serve"),
        Err(Refused::NotFound) => return Response::text(404, "no such file"),
    };
    // The length it had when opened: what it grows by after is not sent.
    Response::new(200)
        .with_header("content-type", content_type(&path))
        .with_header("content-security-policy", "sandbox")
        .with_header("x-content-type-options", "nosniff")
        .with_file(file, len)
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
    fn only_files_under_the_directory_open() {
        let scratch = tree();
        let base = scratch.path().join("base");
        let name = |rel: &str| open(&base, rel).map(|(_, _, p)| p);
        assert_eq!(name("lab1/a.svg"), Ok(PathBuf::from("lab1/a.svg")));
        assert_eq!(name("lab1"), Ok(PathBuf::from("lab1/index.html")));
        assert!(name("./lab1/index.html").is_ok());
        assert_eq!(name("../secret"), Err(Refused::Outside));
        assert_eq!(name("lab1/../../secret"), Err(Refused::Outside));
        assert_eq!(name("/etc/passwd"), Err(Refused::Outside));
        assert_eq!(name("lab1/link"), Err(Refused::Outside));
        assert_eq!(name("lab1/nothing"), Err(Refused::NotFound));
    }

    /// Issue 36, item 10: a file swapped for a link out of the directory between the check and
    /// the open is never served. A thread swaps `lab1/swapped` between a file and a link to
    /// `secret` (each an atomic rename) while the page asks for it over and over.
    #[test]
    fn a_file_swapped_for_a_link_out_is_never_served() {
        use std::sync::atomic::{AtomicBool, Ordering};
        let scratch = tree();
        let dir = scratch.path().to_path_buf();
        let base = dir.join("base");
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let swapper = {
            let (dir, stop) = (dir.clone(), stop.clone());
            std::thread::spawn(move || {
                let at = dir.join("base/lab1/swapped");
                while !stop.load(Ordering::Relaxed) {
                    let link = dir.join("base/lab1/.link");
                    let _ = std::fs::remove_file(&link);
                    std::os::unix::fs::symlink(dir.join("secret"), &link).unwrap();
                    std::fs::rename(&link, &at).unwrap();
                    let file = dir.join("base/lab1/.file");
                    std::fs::write(&file, "fine").unwrap();
                    std::fs::rename(&file, &at).unwrap();
                }
            })
        };
        let (mut served, mut leaked) = (0, 0);
        for _ in 0..20_000 {
            let response = answer(Some(&base), "lab1/swapped");
            if response.status == 200 {
                served += 1;
            }
            if response.body_text() == "no" {
                leaked += 1;
            }
        }
        stop.store(true, Ordering::Relaxed);
        swapper.join().unwrap();
        assert_eq!(leaked, 0, "the file outside was served {leaked} times");
        assert!(served > 0, "the real file was never served");
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
