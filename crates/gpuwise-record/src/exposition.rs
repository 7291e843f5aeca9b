//! The latest readings as OpenMetrics, for `--prometheus-listen`.
//!
//! Metric and label names are those of NVIDIA's dcgm-exporter (`DCGM_FI_DEV_GPU_UTIL{gpu,UUID,
//! device,modelName,Hostname}`, `GPU_I_ID`/`GPU_I_PROFILE` for MIG), so dashboards and
//! `gpuwise report --prometheus` read a recorder's scrape as they read DCGM's. The values come
//! from NVML, not DCGM; each family's help text says so. Encoded by `prometheus-client`; served
//! by `tiny_http`, one small synchronous server thread.

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
fn authorized(req: &tiny_http::Request, token: &str) -> bool {
    use subtle::ConstantTimeEq as _;
    req.headers()
        .iter()
        .find(|h| h.field.equiv("Authorization"))
        .and_then(|h| {
            let (scheme, given) = h.value.as_str().trim().split_once(' ')?;
            scheme
                .eq_ignore_ascii_case("bearer")
                .then(|| bool::from(given.trim().as_bytes().ct_eq(token.as_bytes())))
        })
        .unwrap_or(false)
}

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
    let server = tiny_http::Server::http(addr).map_err(std::io::Error::other)?;
    let bound = server
        .server_addr()
        .to_ip()
        .ok_or_else(|| std::io::Error::other("not an IP listener"))?;
    std::thread::spawn(move || {
        let content_type = tiny_http::Header::from_bytes(
            &b"Content-Type"[..],
            &b"application/openmetrics-text; version=1.0.0; charset=utf-8"[..],
        )
        .ok();
        for req in server.incoming_requests() {
            if token.as_deref().is_some_and(|t| !authorized(&req, t)) {
                let _ = req.respond(
                    tiny_http::Response::from_string("a bearer token is required\n")
                        .with_status_code(401),
                );
                continue;
            }
            let ok = req.url() == "/metrics" || req.url().starts_with("/metrics?");
            let resp = if ok && *req.method() == tiny_http::Method::Get {
                let body = shared.read().map(|e| e.text()).unwrap_or_default();
                let mut r = tiny_http::Response::from_string(body);
                if let Some(h) = content_type.clone() {
                    r.add_header(h);
                }
                r.with_status_code(200)
            } else {
                tiny_http::Response::from_string("gpuwise record serves /metrics\n")
                    .with_status_code(404)
            };
            // A client that hung up is its own business.
            let _ = req.respond(resp);
        }
    });
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
}
