//! A Prometheus HTTP API client: instant and range queries with authentication, extra headers
//! (tenants for Thanos, Mimir, Cortex), a custom CA, timeouts and retries with backoff, and a
//! count of what was pulled.
//!
//! Range queries are cut into pieces of at most [`MAX_POINTS`] points per series (Prometheus
//! rejects more with `bad_data`) and joined. Every error names the query it belongs to.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use gpuwise_core::EpochMs;

use crate::prometheus::{self, Response, ResponseError, Series};

/// Prometheus' limit of points per series in one range query.
pub const MAX_POINTS: i64 = 11_000;

/// How to reach the server.
#[derive(Clone, Debug, Default)]
pub struct ClientOptions {
    /// Base URL (`http://prometheus:9090`, `https://mimir/prometheus`).
    pub url: String,
    /// `Authorization: Bearer …`.
    pub bearer_token: Option<String>,
    /// Basic auth user and password.
    pub basic_auth: Option<(String, String)>,
    /// Extra headers (`X-Scope-OrgID: team-a`).
    pub headers: Vec<(String, String)>,
    /// PEM file of a CA to trust instead of the built-in roots.
    pub ca_pem: Option<Vec<u8>>,
    /// Time limit of one request.
    pub timeout: Duration,
    /// Retries of a failed request (connection errors, 429, 5xx).
    pub retries: u32,
    /// First backoff; doubles per retry.
    pub backoff: Duration,
}

/// What went wrong, with the query it belongs to.
#[derive(Debug, thiserror::Error)]
pub enum PromError {
    /// Configuration (bad URL, bad CA file).
    #[error("Prometheus client: {0}")]
    Config(String),
    /// No answer.
    #[error("cannot reach {url} for `{query}`: {message}")]
    Unreachable {
        /// Server.
        url: String,
        /// Query.
        query: String,
        /// Transport error.
        message: String,
    },
    /// An HTTP error without an API error body.
    #[error("{url} answered HTTP {status} to `{query}`: {body}")]
    Http {
        /// Server.
        url: String,
        /// Query.
        query: String,
        /// Status.
        status: u16,
        /// Start of the body.
        body: String,
    },
    /// The API's own error or an unusable body.
    #[error("`{query}`: {source}")]
    Response {
        /// Query.
        query: String,
        /// What the server said.
        #[source]
        source: ResponseError,
    },
}

impl PromError {
    /// Whether the store lacks a function the query used (an older Prometheus, or a
    /// compatible store without it).
    #[must_use]
    pub fn unknown_function(&self) -> bool {
        match self {
            Self::Response {
                source: ResponseError::Api { message, .. },
                ..
            } => message.contains("unknown function") || message.contains("unsupported function"),
            _ => false,
        }
    }
}

/// What the queries pulled.
#[derive(Debug, Default)]
pub struct Pulled {
    /// Requests sent (retries included).
    pub requests: AtomicU64,
    /// Series received.
    pub series: AtomicU64,
    /// Samples (points) received.
    pub samples: AtomicU64,
    /// Body bytes received.
    pub bytes: AtomicU64,
}

/// A client.
pub struct Client {
    agent: ureq::Agent,
    opts: ClientOptions,
    /// Counters.
    pub pulled: Pulled,
}

impl Client {
    /// A client for `opts`.
    pub fn new(opts: ClientOptions) -> Result<Self, PromError> {
        if !(opts.url.starts_with("http://") || opts.url.starts_with("https://")) {
            return Err(PromError::Config(format!(
                "`{}` is not an http:// or https:// URL",
                opts.url
            )));
        }
        let mut tls = ureq::tls::TlsConfig::builder();
        if let Some(pem) = &opts.ca_pem {
            let certs: Vec<ureq::tls::Certificate<'static>> = ureq::tls::parse_pem(pem)
                .filter_map(|item| match item {
                    Ok(ureq::tls::PemItem::Certificate(c)) => Some(Ok(c)),
                    Ok(_) => None,
                    Err(e) => Some(Err(e)),
                })
                .collect::<Result<_, _>>()
                .map_err(|e| PromError::Config(format!("CA file: {e}")))?;
            if certs.is_empty() {
                return Err(PromError::Config("CA file has no certificate".to_owned()));
            }
            tls = tls.root_certs(ureq::tls::RootCerts::new_with_certs(&certs));
        }
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(opts.timeout))
            .http_status_as_error(false)
            .tls_config(tls.build())
            .build()
            .into();
        Ok(Self {
            agent,
            opts,
            pulled: Pulled::default(),
        })
    }

    fn endpoint(&self, path: &str) -> String {
        format!("{}/api/v1/{path}", self.opts.url.trim_end_matches('/'))
    }

    fn send(
        &self,
        path: &str,
        params: &[(&str, String)],
        query: &str,
    ) -> Result<Response, PromError> {
        let url = self.endpoint(path);
        let mut attempt = 0;
        loop {
            let mut req = self.agent.post(&url);
            if let Some(t) = &self.opts.bearer_token {
                req = req.header("Authorization", &format!("Bearer {t}"));
            }
            if let Some((u, p)) = &self.opts.basic_auth {
                req = req.header(
                    "Authorization",
                    &format!("Basic {}", base64(&format!("{u}:{p}"))),
                );
            }
            for (k, v) in &self.opts.headers {
                req = req.header(k.as_str(), v.as_str());
            }
            self.pulled.requests.fetch_add(1, Ordering::Relaxed);
            let result = req.send_form(params.iter().map(|(k, v)| (*k, v.as_str())));
            let unreachable = |message: String| PromError::Unreachable {
                url: url.clone(),
                query: query.to_owned(),
                message,
            };
            // (error, whether a retry may help)
            let outcome: Result<Response, (PromError, bool)> = match result {
                Err(e) => Err((unreachable(e.to_string()), true)),
                Ok(mut resp) => {
                    let status = resp.status().as_u16();
                    match resp
                        .body_mut()
                        .with_config()
                        .limit(1 << 30)
                        .read_to_string()
                    {
                        Err(e) => Err((unreachable(e.to_string()), true)),
                        Ok(body) => {
                            self.pulled
                                .bytes
                                .fetch_add(body.len() as u64, Ordering::Relaxed);
                            let http = |status| PromError::Http {
                                url: url.clone(),
                                query: query.to_owned(),
                                status,
                                body: body.chars().take(300).collect(),
                            };
                            // The API answers errors with a JSON body too (400 bad_data,
                            // 422 execution, 503 timeout): use it whenever it is one.
                            match prometheus::parse(body.as_bytes()) {
                                Ok(r) if status < 300 => Ok(r),
                                Err(e @ ResponseError::Api { .. }) => Err((
                                    PromError::Response {
                                        query: query.to_owned(),
                                        source: e,
                                    },
                                    status >= 500,
                                )),
                                _ if status == 429 || status >= 500 => Err((http(status), true)),
                                _ if status >= 300 => Err((http(status), false)),
                                Err(e) => Err((
                                    PromError::Response {
                                        query: query.to_owned(),
                                        source: e,
                                    },
                                    false,
                                )),
                                Ok(r) => Ok(r),
                            }
                        }
                    }
                }
            };
            match outcome {
                Ok(r) => {
                    self.pulled
                        .series
                        .fetch_add(r.series.len() as u64, Ordering::Relaxed);
                    let n: usize = r.series.iter().map(|s| s.samples.len()).sum();
                    self.pulled.samples.fetch_add(n as u64, Ordering::Relaxed);
                    return Ok(r);
                }
                Err((_, true)) if attempt < self.opts.retries => {
                    std::thread::sleep(self.opts.backoff * 2u32.saturating_pow(attempt));
                    attempt += 1;
                }
                Err((e, _)) => return Err(e),
            }
        }
    }

    /// An instant query at `time`.
    pub fn query(&self, promql: &str, time_ms: EpochMs) -> Result<Response, PromError> {
        self.send(
            "query",
            &[("query", promql.to_owned()), ("time", secs(time_ms))],
            promql,
        )
    }

    /// A range query, cut into pieces of at most [`MAX_POINTS`] points and joined per series.
    pub fn query_range(
        &self,
        promql: &str,
        start_ms: EpochMs,
        end_ms: EpochMs,
        step_ms: i64,
    ) -> Result<Response, PromError> {
        let step = step_ms.max(1);
        let span = step * (MAX_POINTS - 1);
        let mut joined: std::collections::BTreeMap<
            std::collections::BTreeMap<String, String>,
            Vec<(EpochMs, f64)>,
        > = std::collections::BTreeMap::new();
        let mut warnings = Vec::new();
        let mut infos = Vec::new();
        let mut t = start_ms;
        while t <= end_ms {
            let piece_end = (t + span).min(end_ms);
            let r = self.send(
                "query_range",
                &[
                    ("query", promql.to_owned()),
                    ("start", secs(t)),
                    ("end", secs(piece_end)),
                    ("step", format!("{}", step as f64 / 1000.0)),
                ],
                promql,
            )?;
            warnings.extend(r.warnings);
            infos.extend(r.infos);
            for s in r.series {
                joined.entry(s.labels).or_default().extend(s.samples);
            }
            t = piece_end + step;
        }
        Ok(Response {
            result_type: "matrix".to_owned(),
            series: joined
                .into_iter()
                .map(|(labels, mut samples)| {
                    samples.dedup_by_key(|(ts, _)| *ts);
                    Series { labels, samples }
                })
                .collect(),
            warnings,
            infos,
        })
    }
}

fn secs(ms: EpochMs) -> String {
    format!("{}.{:03}", ms.div_euclid(1000), ms.rem_euclid(1000))
}

/// Standard base64 of `s` (for a basic-auth header; written here rather than adding a crate for
/// twenty lines).
fn base64(s: &str) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let b = s.as_bytes();
    let mut out = String::with_capacity(b.len().div_ceil(3) * 4);
    for c in b.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= c.len() {
                out.push(T[(n >> (18 - 6 * i)) as usize & 63] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_of_basic_auth() {
        assert_eq!(
            base64("Aladdin:open sesame"),
            "QWxhZGRpbjpvcGVuIHNlc2FtZQ=="
        );
        assert_eq!(base64("a"), "YQ==");
        assert_eq!(base64("ab"), "YWI=");
        assert_eq!(base64("abc"), "YWJj");
    }

    #[test]
    fn seconds_with_millis() {
        assert_eq!(secs(1_767_571_200_123), "1767571200.123");
        assert_eq!(secs(5), "0.005");
    }

    /// A one-connection-per-response HTTP server answering `responses` in order.
    fn fake(responses: Vec<(u16, &'static str)>) -> (String, std::thread::JoinHandle<Vec<String>>) {
        use std::io::{BufRead as _, BufReader, Read as _, Write as _};
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let url = format!("http://{}", l.local_addr().expect("addr"));
        let h = std::thread::spawn(move || {
            let mut heads = Vec::new();
            for (status, body) in responses {
                let Ok((mut s, _)) = l.accept() else {
                    return heads;
                };
                let mut head = String::new();
                let mut r = BufReader::new(s.try_clone().expect("clone"));
                let mut len = 0usize;
                loop {
                    let mut line = String::new();
                    if r.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                        break;
                    }
                    head.push_str(&line);
                    if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                        len = v.trim().parse().unwrap_or(0);
                    }
                }
                let mut req = vec![0; len];
                let _ = r.read_exact(&mut req);
                head.push_str(&String::from_utf8_lossy(&req));
                heads.push(head);
                let _ = write!(
                    s,
                    "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
            heads
        });
        (url, h)
    }

    fn client(url: String, retries: u32) -> Client {
        Client::new(ClientOptions {
            url,
            timeout: Duration::from_secs(5),
            retries,
            backoff: Duration::from_millis(5),
            headers: vec![("X-Scope-OrgID".into(), "team-a".into())],
            bearer_token: Some("t0ken".into()),
            ..ClientOptions::default()
        })
        .expect("client")
    }

    const OK: &str = r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{"UUID":"GPU-1"},"value":[1700000000,"42"]}]},"warnings":["store gateway down: partial response"]}"#;

    #[test]
    fn retries_5xx_then_succeeds_and_counts_what_it_pulled() {
        let (url, h) = fake(vec![(503, "overloaded"), (502, "bad gateway"), (200, OK)]);
        let c = client(url, 2);
        let r = c.query("up", 1_700_000_000_000).expect("third try");
        let heads = h.join().expect("server");
        let last = heads.last().expect("a request").to_ascii_lowercase();
        assert!(last.starts_with("post /api/v1/query "), "{last}");
        assert!(last.contains("authorization: bearer t0ken"), "{last}");
        assert!(last.contains("x-scope-orgid: team-a"), "{last}");
        assert!(last.contains("query=up&time=1700000000.000"), "{last}");
        assert_eq!(r.series[0].samples, vec![(1_700_000_000_000, 42.0)]);
        assert_eq!(
            r.warnings,
            vec!["store gateway down: partial response".to_owned()]
        );
        assert_eq!(c.pulled.requests.load(Ordering::Relaxed), 3);
        assert_eq!(c.pulled.series.load(Ordering::Relaxed), 1);
        assert_eq!(c.pulled.samples.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn api_errors_and_http_errors_name_the_query() {
        let (url, h) = fake(vec![
            (
                400,
                r#"{"status":"error","errorType":"bad_data","error":"unknown function with name \"quantile_over_time\""}"#,
            ),
            (401, "unauthorized"),
            (500, "boom"),
        ]);
        let c = client(url.clone(), 0);
        let e = c
            .query("quantile_over_time(0.95, x[1h])", 0)
            .expect_err("400");
        assert!(e.unknown_function(), "{e}");
        assert!(
            e.to_string()
                .starts_with("`quantile_over_time(0.95, x[1h])`: Prometheus error `bad_data`"),
            "{e}"
        );
        let e = c.query("up", 0).expect_err("401");
        assert_eq!(
            e.to_string(),
            format!("{url}/api/v1/query answered HTTP 401 to `up`: unauthorized")
        );
        let e = c.query("up", 0).expect_err("500, no retries");
        assert!(e.to_string().contains("HTTP 500"), "{e}");
        h.join().expect("server");
    }

    #[test]
    fn a_ca_file_without_a_certificate_is_refused() {
        let e = Client::new(ClientOptions {
            url: "https://prometheus:9090".into(),
            ca_pem: Some(b"not a certificate".to_vec()),
            ..ClientOptions::default()
        })
        .err()
        .expect("refused");
        assert_eq!(
            e.to_string(),
            "Prometheus client: CA file has no certificate"
        );
    }

    #[test]
    fn bad_urls_and_unreachable_servers_are_named() {
        assert!(matches!(
            Client::new(ClientOptions {
                url: "prometheus:9090".into(),
                ..ClientOptions::default()
            }),
            Err(PromError::Config(_))
        ));
        // A port nobody listens on (bound, then released).
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("port");
        let c = Client::new(ClientOptions {
            url: format!("http://127.0.0.1:{port}"),
            timeout: Duration::from_secs(2),
            retries: 1,
            backoff: Duration::from_millis(10),
            ..ClientOptions::default()
        })
        .expect("client");
        let e = c.query("up", 0).expect_err("nobody listens");
        let msg = e.to_string();
        assert!(
            msg.starts_with(&format!(
                "cannot reach http://127.0.0.1:{port}/api/v1/query for `up`"
            )),
            "{msg}"
        );
        assert_eq!(c.pulled.requests.load(Ordering::Relaxed), 2, "one retry");
    }
}
