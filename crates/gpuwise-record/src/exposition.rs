//! The latest readings as OpenMetrics, for `--prometheus-listen`.
//!
//! Metric and label names are those of NVIDIA's dcgm-exporter (`DCGM_FI_DEV_GPU_UTIL{gpu,UUID,
//! device,modelName,Hostname}`, `GPU_I_ID`/`GPU_I_PROFILE` for MIG), so dashboards and
//! `gpuwise report --prometheus` read a recorder's scrape as they read DCGM's. The values come
//! from NVML, not DCGM; each family's help text says so. Encoded by `prometheus-client`; served
//! by hyper on a thread of its own (the HTTP stack `serve` uses), with a header-read timeout
//! and a connection cap, so clients that never finish a request cannot hold the exporter.

use std::net::SocketAddr;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, RwLock};

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::reading::{GpuReading, Snapshot};

type Labels = Vec<(&'static str, String)>;
type G = Family<Labels, Gauge<f64, AtomicU64>>;

/// One gauge per reading, by dcgm-exporter name.
struct Families {
    util: G,
    mem_copy: G,
    fb_used: G,
    fb_free: G,
    power: G,
    power_limit: G,
    sm_clock: G,
    temp: G,
    pcie_tx: G,
    pcie_rx: G,
}

/// The registry the server encodes and the recorder updates.
pub struct Exposition {
    registry: Registry,
    families: Families,
    host: String,
}

impl Exposition {
    /// An empty exposition for readings of `host`.
    #[must_use]
    pub fn new(host: &str) -> Self {
        let mut registry = Registry::default();
        let mut family = |name: &str, help: &str| {
            let f = G::default();
            registry.register(name, format!("{help} (NVML, by gpuwise record)"), f.clone());
            f
        };
        let families = Families {
            util: family("DCGM_FI_DEV_GPU_UTIL", "GPU utilization, %"),
            mem_copy: family("DCGM_FI_DEV_MEM_COPY_UTIL", "Memory utilization, %"),
            fb_used: family("DCGM_FI_DEV_FB_USED", "Framebuffer memory used, MiB"),
            fb_free: family("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free, MiB"),
            power: family("DCGM_FI_DEV_POWER_USAGE", "Power draw, W"),
            power_limit: family("DCGM_FI_DEV_POWER_MGMT_LIMIT", "Enforced power limit, W"),
            sm_clock: family("DCGM_FI_DEV_SM_CLOCK", "SM clock, MHz"),
            temp: family("DCGM_FI_DEV_GPU_TEMP", "GPU temperature, C"),
            pcie_tx: family("DCGM_FI_PROF_PCIE_TX_BYTES", "PCIe transmit rate, bytes/s"),
            pcie_rx: family("DCGM_FI_PROF_PCIE_RX_BYTES", "PCIe receive rate, bytes/s"),
        };
        Self {
            registry,
            families,
            host: host.to_owned(),
        }
    }

    fn labels(&self, g: &GpuReading) -> Labels {
        let mut l = vec![
            ("gpu", g.index.map(|i| i.to_string()).unwrap_or_default()),
            ("UUID", g.uuid.clone()),
            (
                "device",
                g.index.map(|i| format!("nvidia{i}")).unwrap_or_default(),
            ),
            ("modelName", g.name.clone().unwrap_or_default()),
            ("Hostname", self.host.clone()),
        ];
        if let Some(m) = &g.mig {
            l.push(("GPU_I_ID", m.uuid.clone()));
            l.push(("GPU_I_PROFILE", m.profile.clone().unwrap_or_default()));
        }
        l
    }

    /// Replace the readings with those of `snap` (devices gone since are dropped).
    #[allow(clippy::cast_precision_loss)] // MiB and KB/s counts far below 2^52
    pub fn update(&self, snap: &Snapshot) {
        let f = &self.families;
        let all = [
            &f.util,
            &f.mem_copy,
            &f.fb_used,
            &f.fb_free,
            &f.power,
            &f.power_limit,
            &f.sm_clock,
            &f.temp,
            &f.pcie_tx,
            &f.pcie_rx,
        ];
        for fam in all {
            fam.clear();
        }
        for g in &snap.gpus {
            let labels = self.labels(g);
            let free = g
                .mem_total_mib
                .zip(g.mem_used_mib)
                .map(|(t, u)| t.saturating_sub(u));
            let values = [
                (&f.util, g.util_gpu_pct.map(f64::from)),
                (&f.mem_copy, g.util_mem_pct.map(f64::from)),
                (&f.fb_used, g.mem_used_mib.map(|v| v as f64)),
                (&f.fb_free, free.map(|v| v as f64)),
                (&f.power, g.power_w),
                (&f.power_limit, g.power_limit_w),
                (&f.sm_clock, g.sm_clock_mhz.map(f64::from)),
                (&f.temp, g.temperature_c.map(f64::from)),
                (&f.pcie_tx, g.pcie_tx_kbps.map(|v| f64::from(v) * 1000.0)),
                (&f.pcie_rx, g.pcie_rx_kbps.map(|v| f64::from(v) * 1000.0)),
            ];
            // An unknown reading is left out of the scrape, never exposed as 0.
            for (fam, v) in values {
                if let Some(v) = v {
                    fam.get_or_create(&labels).set(v);
                }
            }
        }
    }

    /// The OpenMetrics text of the latest readings.
    #[must_use]
    pub fn text(&self) -> String {
        let mut out = String::new();
        // Writing to a String cannot fail.
        let _ = encode(&mut out, &self.registry);
        out
    }
}

/// The shared exposition, read by the server thread, written by the recorder.
pub type Shared = Arc<RwLock<Exposition>>;

/// Whether a request carries `Authorization: Bearer TOKEN` (the scheme in any case), compared
/// in constant time.
fn authorized(headers: &hyper::HeaderMap, token: &str) -> bool {
    use subtle::ConstantTimeEq as _;
    headers
        .get(hyper::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            let (scheme, given) = v.trim().split_once(' ')?;
            scheme
                .eq_ignore_ascii_case("bearer")
                .then(|| bool::from(given.trim().as_bytes().ct_eq(token.as_bytes())))
        })
        .unwrap_or(false)
}

/// The answer to one request: the exposition for `GET /metrics`, else a 401 or a 404.
fn respond<B>(
    req: &hyper::Request<B>,
    shared: &Shared,
    token: Option<&str>,
) -> hyper::Response<String> {
    let reply = |status: u16, body: String| {
        let mut r = hyper::Response::new(body);
        *r.status_mut() = hyper::StatusCode::from_u16(status).unwrap_or_default();
        r
    };
    if token.is_some_and(|t| !authorized(req.headers(), t)) {
        return reply(401, "a bearer token is required\n".into());
    }
    if req.uri().path() != "/metrics" || req.method() != hyper::Method::GET {
        return reply(404, "gpuwise record serves /metrics\n".into());
    }
    let mut r = reply(200, shared.read().map(|e| e.text()).unwrap_or_default());
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static(
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        ),
    );
    r
}

/// Connections served at once; more wait in the listen backlog.
const MAX_CONNECTIONS: usize = 64;

/// The longest a connection may take to send a request's headers before it is closed.
const HEADER_READ_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Serve `GET /metrics` on `addr` from a thread of its own; with `token`, only to requests
/// that carry it (`Authorization: Bearer`, as Prometheus' scrape `authorization` sends it).
///
/// # Errors
/// When the address cannot be bound.
pub fn serve(
    addr: SocketAddr,
    shared: Shared,
    token: Option<String>,
) -> Result<SocketAddr, std::io::Error> {
    serve_with(addr, shared, token, HEADER_READ_TIMEOUT)
}

fn serve_with(
    addr: SocketAddr,
    shared: Shared,
    token: Option<String>,
    header_timeout: std::time::Duration,
) -> Result<SocketAddr, std::io::Error> {
    let listener = std::net::TcpListener::bind(addr)?;
    let bound = listener.local_addr()?;
    listener.set_nonblocking(true)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    std::thread::Builder::new()
        .name("gpuwise-metrics".into())
        .spawn(move || {
            rt.block_on(async move {
                let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
                    return;
                };
                let permits = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
                let token: Option<Arc<str>> = token.map(Arc::from);
                loop {
                    let Ok(permit) = permits.clone().acquire_owned().await else {
                        return;
                    };
                    // A connection that failed before it was accepted: the next one may do.
                    let Ok((stream, _)) = listener.accept().await else {
                        continue;
                    };
                    let (shared, token) = (shared.clone(), token.clone());
                    tokio::spawn(async move {
                        let service = hyper::service::service_fn(move |req| {
                            let r = respond(&req, &shared, token.as_deref());
                            async move { Ok::<_, std::convert::Infallible>(r) }
                        });
                        // A client that hung up is its own business.
                        let _ = hyper::server::conn::http1::Builder::new()
                            .timer(hyper_util::rt::TokioTimer::new())
                            .header_read_timeout(header_timeout)
                            .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                            .await;
                        drop(permit);
                    });
                }
            });
        })?;
    Ok(bound)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reading::Mig;

    #[test]
    fn dcgm_names_and_unknowns_left_out() {
        let e = Exposition::new("node\"a");
        let snap = Snapshot {
            at_ms: 0,
            gpus: vec![
                GpuReading {
                    index: Some(0),
                    uuid: "GPU-1".into(),
                    name: Some("NVIDIA H100 80GB HBM3".into()),
                    util_gpu_pct: Some(37),
                    mem_used_mib: Some(100),
                    mem_total_mib: Some(81_559),
                    ..GpuReading::default()
                },
                GpuReading {
                    index: Some(1),
                    uuid: "GPU-2".into(),
                    mig: Some(Mig {
                        uuid: "MIG-3".into(),
                        profile: Some("1g.10gb".into()),
                    }),
                    ..GpuReading::default()
                },
            ],
            processes: Vec::new(),
        };
        e.update(&snap);
        let t = e.text();
        assert!(t.contains("DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",UUID=\"GPU-1\",device=\"nvidia0\",modelName=\"NVIDIA H100 80GB HBM3\",Hostname=\"node\\\"a\"} 37.0"), "{t}");
        assert!(t.contains("DCGM_FI_DEV_FB_FREE{gpu=\"0\""), "{t}");
        assert!(t.contains(" 81459.0"), "{t}");
        // No power reading: no power sample; the MIG instance has no readings at all.
        assert!(!t.contains("DCGM_FI_DEV_POWER_USAGE{"), "{t}");
        assert!(!t.contains("GPU-2"), "{t}");
        assert!(t.ends_with("# EOF\n"), "{t}");
        // A device that is gone is gone from the next scrape.
        e.update(&Snapshot::default());
        assert!(!e.text().contains("GPU-1"));
    }

    /// One raw HTTP/1.1 exchange: the status line's code and the whole answer.
    fn exchange(addr: SocketAddr, request: &str) -> (u16, String) {
        use std::io::{Read as _, Write as _};
        let mut c = std::net::TcpStream::connect(addr).expect("connect");
        c.set_read_timeout(Some(std::time::Duration::from_secs(10)))
            .expect("timeout");
        c.write_all(request.as_bytes()).expect("send");
        let mut out = String::new();
        let _ = c.read_to_string(&mut out);
        let code = out
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        (code, out)
    }

    /// The exporter answers `/metrics` with the exposition, 404 elsewhere, 401 without the
    /// token (the scheme in any case), and closes a connection that never finishes its headers.
    #[test]
    fn serves_metrics_with_a_token_and_closes_idle_connections() {
        let shared: Shared = Arc::new(RwLock::new(Exposition::new("node-a")));
        let addr = serve_with(
            "127.0.0.1:0".parse().expect("addr"),
            shared,
            Some("tok".into()),
            std::time::Duration::from_millis(300),
        )
        .expect("bound");
        let get = |path: &str, auth: &str| {
            exchange(
                addr,
                &format!("GET {path} HTTP/1.1\r\nHost: x\r\n{auth}Connection: close\r\n\r\n"),
            )
        };
        let (code, body) = get("/metrics", "Authorization: bearer tok\r\n");
        assert_eq!(code, 200, "{body}");
        assert!(body.contains("application/openmetrics-text"), "{body}");
        assert!(body.contains("# EOF"), "{body}");
        assert_eq!(get("/metrics", "").0, 401);
        assert_eq!(get("/metrics", "Authorization: Bearer nope\r\n").0, 401);
        assert_eq!(get("/other", "Authorization: Bearer tok\r\n").0, 404);
        // Half a request, then nothing: closed after the header timeout.
        let started = std::time::Instant::now();
        let (code, _) = exchange(addr, "GET /metrics HTTP/1.1\r\nHost:");
        assert_ne!(code, 200);
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
    }
}
