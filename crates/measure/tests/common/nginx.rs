//! nginx serving the responsiveness test's endpoints on 127.0.0.1 over TLS, for the tests of
//! the HTTP far end (http_far_end.rs) and of the lab's measurement of its CPU cost
//! (crates/lab/tests/bench_measure.rs includes this file by its path).

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use unbloat_measure::http::HttpOptions;

const NGINX: &str = "/usr/sbin/nginx";

/// nginx serving the responsiveness endpoints on 127.0.0.1 over TLS, stopped on drop.
pub struct Nginx {
    child: Child,
    dir: PathBuf,
    port: u16,
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

pub fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

fn run(cmd: &mut Command) {
    let out = cmd.output().expect("run");
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A CA and a certificate for 127.0.0.1 signed by it, as the lab makes them.
pub fn make_certs(dir: &Path) {
    let d = |f: &str| dir.join(f);
    run(Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
        ])
        .arg("/CN=unbloat test CA")
        .arg("-keyout")
        .arg(d("ca.key"))
        .arg("-out")
        .arg(d("ca.pem")));
    run(Command::new("openssl")
        .args([
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            "/CN=127.0.0.1",
        ])
        .arg("-keyout")
        .arg(d("server.key"))
        .arg("-out")
        .arg(d("server.csr")));
    std::fs::write(
        d("ext.cnf"),
        "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n",
    )
    .expect("ext");
    run(Command::new("openssl")
        .args(["x509", "-req", "-days", "2", "-CAcreateserial"])
        .arg("-in")
        .arg(d("server.csr"))
        .arg("-CA")
        .arg(d("ca.pem"))
        .arg("-CAkey")
        .arg(d("ca.key"))
        .arg("-extfile")
        .arg(d("ext.cnf"))
        .arg("-out")
        .arg(d("server.pem")));
}

impl Nginx {
    /// Starts nginx; `h2` offers HTTP/2 by ALPN. Nginx and openssl missing is a failure that
    /// says how to install them, never a skip.
    pub fn start(h2: bool) -> Nginx {
        assert!(
            Path::new(NGINX).exists() && Command::new("openssl").arg("version").output().is_ok(),
            "needs {NGINX} and openssl: run scripts/install-deps"
        );
        let dir = std::env::temp_dir().join(format!(
            "unbloat-nginx-{}-{}",
            std::process::id(),
            free_port()
        ));
        let www = dir.join("www");
        std::fs::create_dir_all(www.join(".well-known")).expect("mkdir");
        std::fs::create_dir_all(dir.join("tmp")).expect("mkdir");
        make_certs(&dir);
        let port = free_port();
        let base = format!("https://127.0.0.1:{port}");
        std::fs::write(www.join("small"), b"x").expect("small");
        // A sparse 8 GiB file: the download never ends within a test.
        run(Command::new("truncate")
            .args(["-s", "8G"])
            .arg(www.join("large")));
        std::fs::write(
            www.join(".well-known/nq"),
            format!(
                r#"{{"version":1,"urls":{{"small_https_download_url":"{base}/small",
                "large_https_download_url":"{base}/large","https_upload_url":"{base}/upload"}}}}"#
            ),
        )
        .expect("config");
        let d = dir.display();
        let http2 = if h2 { " http2" } else { "" };
        std::fs::write(
            dir.join("nginx.conf"),
            format!(
                "worker_processes 1;\nerror_log {d}/error.log;\npid {d}/nginx.pid;\n\
                 events {{ worker_connections 512; }}\n\
                 http {{\n access_log off;\n client_body_temp_path {d}/tmp;\n\
                 proxy_temp_path {d}/tmp;\n fastcgi_temp_path {d}/tmp;\n\
                 uwsgi_temp_path {d}/tmp;\n scgi_temp_path {d}/tmp;\n\
                 server {{\n  listen 127.0.0.1:{port} ssl{http2};\n\
                 ssl_certificate {d}/server.pem;\n  ssl_certificate_key {d}/server.key;\n\
                 root {d}/www;\n\
                 http2_body_preread_size 16m;\n\
                 limit_rate 8m;\n\
                 location = /upload {{ client_max_body_size 0; return 200; }}\n }}\n}}\n"
            ),
        )
        .expect("conf");
        let child = Command::new(NGINX)
            .arg("-p")
            .arg(&dir)
            .arg("-c")
            .arg(dir.join("nginx.conf"))
            .args(["-g", "daemon off;"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("nginx");
        let nginx = Nginx { child, dir, port };
        let until = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < until, "nginx did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        nginx
    }

    pub fn config_url(&self) -> String {
        format!("https://127.0.0.1:{}/.well-known/nq", self.port)
    }

    pub fn opts(&self) -> HttpOptions {
        HttpOptions {
            ca_file: Some(self.dir.join("ca.pem")),
            ..HttpOptions::default()
        }
    }
}
