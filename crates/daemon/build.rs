//! The web page's files, gzip-compressed at build time: the binary carries them compressed
//! (36 KB of text, 12.7 KB compressed; by Zopfli, whose slower deflate search saves 300 bytes
//! against gzip -9: the router build is counted in bytes) and sends them as they are, with `Content-Encoding: gzip`
//! (src/web/mod.rs); no compressor is linked, and only miniz_oxide's inflate, for a client that
//! does not take gzip. The gzip header carries no time
//! stamp, so the same sources give the same binary.

use std::path::PathBuf;

/// The files of src/web/assets, as the page asks for them.
const ASSETS: [&str; 5] = ["index.html", "app.js", "chart.js", "forms.js", "style.css"];

fn main() {
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    for name in ASSETS {
        let src = format!("src/web/assets/{name}");
        println!("cargo:rerun-if-changed={src}");
        let text = std::fs::read(&src).unwrap_or_else(|e| panic!("{src}: {e}"));
        let mut gz = Vec::new();
        zopfli::compress(
            zopfli::Options::default(),
            zopfli::Format::Gzip,
            &text[..],
            &mut gz,
        )
        .expect("compress in memory");
        std::fs::write(out.join(format!("{name}.gz")), gz).expect("write to OUT_DIR");
    }
}
