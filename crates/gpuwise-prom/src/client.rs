//! A Prometheus HTTP API client: instant and range queries with authentication, extra headers
//! (tenants for Thanos, Mimir, Cortex), a custom CA, timeouts and retries with backoff, and a
//! count of what was pulled.
//!
//! Range queries are cut into pieces of at most [`MAX_POINTS`] points per series (Prometheus
//! rejects more with `bad_data`) and joined. Every error names the query it belongs to.

use std::sync::atomic::{AtomicU64, Ordering};

use base64::Engine as _;
use std::time::Duration;

use gpuwise_core::EpochMs;

use crate::api::{self, Response, ResponseError, Series};

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
    /// The largest response body taken, checked while reading (0: [`MAX_RESPONSE_BYTES`]).
    pub max_response_bytes: u64,
}

/// The default limit of one response body: far above what the pushdown pulls, and small enough
/// that parsing it stays within a few hundred megabytes.
pub const MAX_RESPONSE_BYTES: u64 = 256 << 20;

/// The longest wait a `Retry-After` header is honoured for; a longer one is cut to this.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

/// How many redirects to the same host are followed.
const MAX_REDIRECTS: u32 = 5;

/// How much of an error body a message quotes.
const BODY_QUOTE: usize = 200;

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
    /// A response body above the limit, stopped while reading.
    #[error("{url} answered `{query}` with more than {} MiB; narrow the window (--start/--end, --last) or the --selector", limit >> 20)]
    TooLarge {
        /// Server.
        url: String,
        /// Query.
        query: String,
        /// The limit in bytes.
        limit: u64,
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

/// The parts of an `http(s)://[user[:password]@]host[:port][/path]` URL.
struct UrlParts<'a> {
    scheme: &'a str,
    userinfo: Option<&'a str>,
    host_port: &'a str,
    rest: &'a str,
}

fn url_parts(url: &str) -> Option<UrlParts<'_>> {
    let (scheme, after) = url.split_once("://")?;
    let end = after.find(['/', '?', '#']).unwrap_or(after.len());
    let (authority, rest) = after.split_at(end);
    let (userinfo, host_port) = match authority.rsplit_once('@') {
        Some((u, h)) => (Some(u), h),
        None => (None, authority),
    };
    Some(UrlParts {
        scheme,
        userinfo,
        host_port,
        rest,
    })
}

/// `url` without the user and password it may carry (`http://user:pass@host` →
/// `http://host`), and those credentials, percent-decoded. Every message, report and error
/// names the URL this returns, so a password given in a URL never appears in output.
#[must_use]
pub fn split_credentials(url: &str) -> (String, Option<(String, String)>) {
    match url_parts(url) {
        Some(UrlParts {
            scheme,
            userinfo: Some(info),
            host_port,
            rest,
        }) => {
            let (user, pass) = info.split_once(':').unwrap_or((info, ""));
            (
                format!("{scheme}://{host_port}{rest}"),
                Some((percent_decode(user), percent_decode(pass))),
            )
        }
        _ => (url.to_owned(), None),
    }
}

/// Decode `%XX` escapes (a URL's user and password); other bytes pass through.
fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && let Some(v) = s
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(v);
            i += 3;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The origin (`scheme://host:port`, lowercased) of an absolute URL.
fn origin(url: &str) -> Option<String> {
    let p = url_parts(url)?;
    let default = if p.scheme.eq_ignore_ascii_case("https") {
        ":443"
    } else {
        ":80"
    };
    let hp = p.host_port.to_ascii_lowercase();
    let hp = if hp
        .rsplit_once(':')
        .is_some_and(|(_, port)| port.bytes().all(|c| c.is_ascii_digit()))
        && !hp.ends_with(']')
    {
        hp
    } else {
        format!("{hp}{default}")
    };
    Some(format!("{}://{hp}", p.scheme.to_ascii_lowercase()))
}

/// The seconds a `Retry-After` header asks for (delay-seconds or an HTTP date), from `now`.
fn retry_after(value: &str, now: jiff::Timestamp) -> Option<Duration> {
    let v = value.trim();
    if let Ok(secs) = v.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let when = jiff::fmt::rfc2822::parse(v).ok()?.timestamp();
    let ms = when.as_millisecond() - now.as_millisecond();
    Some(Duration::from_millis(u64::try_from(ms).unwrap_or(0)))
}

impl Client {
    /// A client for `opts`. A user and password inside the URL become basic auth (unless basic
    /// auth is given) and are removed from the URL the client names in messages.
    pub fn new(mut opts: ClientOptions) -> Result<Self, PromError> {
        let (url, creds) = split_credentials(&opts.url);
        opts.url = url;
        if opts.basic_auth.is_none() {
            opts.basic_auth = creds;
        }
        if !(opts.url.starts_with("http://") || opts.url.starts_with("https://")) {
            return Err(PromError::Config(format!(
                "`{}` is not an http:// or https:// URL",
                opts.url
            )));
        }
        if opts.timeout.is_zero() {
            return Err(PromError::Config(
                "the timeout must be longer than zero".to_owned(),
            ));
        }
        if opts.max_response_bytes == 0 {
            opts.max_response_bytes = MAX_RESPONSE_BYTES;
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
        // Redirects are followed by hand (see `send`): only to the same host, where the
        // credentials and custom headers may go.
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(opts.timeout))
            .http_status_as_error(false)
            .max_redirects(0)
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

    /// The server's URL as messages name it (without credentials).
    #[must_use]
    pub fn url(&self) -> &str {
        &self.opts.url
    }

    /// `text` with every secret this client sends (token, password, header values) replaced
    /// by `***`, control characters dropped, cut to a short quote.
    fn quote(&self, text: &str) -> String {
        let mut t = text.to_owned();
        let mut secrets: Vec<&str> = Vec::new();
        if let Some(b) = &self.opts.bearer_token {
            secrets.push(b);
        }
        if let Some((_, p)) = &self.opts.basic_auth {
            secrets.push(p);
        }
        secrets.extend(self.opts.headers.iter().map(|(_, v)| v.as_str()));
        for s in secrets {
            if s.len() >= 3 {
                t = t.replace(s, "***");
            }
        }
        let clean: String = t
            .chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .collect();
        let mut short: String = clean.trim().chars().take(BODY_QUOTE).collect();
        if clean.trim().chars().count() > BODY_QUOTE {
            short.push('…');
        }
        short
    }

    /// Authorization (bearer or basic) and the extra headers, on every request.
    fn request_headers(&self) -> Vec<(&str, String)> {
        let mut out = Vec::new();
        if let Some(t) = &self.opts.bearer_token {
            out.push(("Authorization", format!("Bearer {t}")));
        }
        if let Some((u, p)) = &self.opts.basic_auth {
            out.push((
                "Authorization",
                format!(
                    "Basic {}",
                    base64::engine::general_purpose::STANDARD.encode(format!("{u}:{p}"))
                ),
            ));
        }
        for (k, v) in &self.opts.headers {
            out.push((k.as_str(), v.clone()));
        }
        out
    }

    fn unreachable(&self, url: &str, query: &str, message: String) -> PromError {
        PromError::Unreachable {
            url: url.to_owned(),
            query: query.to_owned(),
            message,
        }
    }

    /// A response that is not a redirect: its body within the size limit, parsed; API errors
    /// (a JSON body on 4xx/5xx) named; whether a retry may help (429, 5xx, a broken read).
    fn answer(
        &self,
        url: &str,
        query: &str,
        mut resp: ureq::http::Response<ureq::Body>,
    ) -> Result<Response, (PromError, bool)> {
        let status = resp.status().as_u16();
        let limit = self.opts.max_response_bytes;
        let body = match resp.body_mut().with_config().limit(limit).read_to_string() {
            Err(ureq::Error::BodyExceedsLimit(_)) => {
                return Err((
                    PromError::TooLarge {
                        url: url.to_owned(),
                        query: query.to_owned(),
                        limit,
                    },
                    false,
                ));
            }
            Err(e) => return Err((self.unreachable(url, query, e.to_string()), true)),
            Ok(body) => body,
        };
        self.pulled
            .bytes
            .fetch_add(body.len() as u64, Ordering::Relaxed);
        let http = |status| PromError::Http {
            url: url.to_owned(),
            query: query.to_owned(),
            status,
            body: self.quote(&body),
        };
        // The API answers errors with a JSON body too (400 bad_data, 422 execution, 503
        // timeout): use it whenever it is one.
        match api::parse(body.as_bytes()) {
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

    fn send(
        &self,
        path: &str,
        params: &[(&str, String)],
        query: &str,
    ) -> Result<Response, PromError> {
        let mut url = self.endpoint(path);
        let mut attempt = 0;
        let mut redirects = 0;
        loop {
            let mut req = self.agent.post(&url);
            for (k, v) in self.request_headers() {
                req = req.header(k, v.as_str());
            }
            self.pulled.requests.fetch_add(1, Ordering::Relaxed);
            let result = req.send_form(params.iter().map(|(k, v)| (*k, v.as_str())));
            let mut wait: Option<Duration> = None;
            // (error, whether a retry may help)
            let outcome: Result<Response, (PromError, bool)> = match result {
                Err(e) => Err((self.unreachable(&url, query, e.to_string()), true)),
                Ok(resp) if resp.status().is_redirection() => {
                    match redirect(&url, &resp, query, redirects) {
                        Ok(to) => {
                            redirects += 1;
                            url = to;
                            continue;
                        }
                        Err(e) => Err((e, false)),
                    }
                }
                Ok(resp) => {
                    wait = resp
                        .headers()
                        .get("retry-after")
                        .and_then(|v| v.to_str().ok())
                        .and_then(|v| retry_after(v, jiff::Timestamp::now()));
                    self.answer(&url, query, resp)
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
                    // The server's `Retry-After` (bounded) when it sent one, else backoff.
                    let backoff = self.opts.backoff * 2u32.saturating_pow(attempt);
                    std::thread::sleep(wait.map_or(backoff, |w| w.min(MAX_RETRY_AFTER)));
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

/// `location` made absolute against `base` (a path-only Location keeps the base's origin).
fn absolute(base: &str, location: &str) -> String {
    if location.contains("://") {
        return location.to_owned();
    }
    let Some(p) = url_parts(base) else {
        return location.to_owned();
    };
    if location.starts_with('/') {
        format!("{}://{}{location}", p.scheme, p.host_port)
    } else {
        let dir = p.rest.rfind('/').map_or("", |i| &p.rest[..=i]);
        format!("{}://{}{dir}{location}", p.scheme, p.host_port)
    }
}

/// Where a redirect goes, when it stays on the same host (credentials and headers go nowhere
/// else) and within the redirect limit.
fn redirect<B>(
    url: &str,
    resp: &ureq::http::Response<B>,
    query: &str,
    redirects: u32,
) -> Result<String, PromError> {
    let to = resp
        .headers()
        .get("location")
        .and_then(|v| v.to_str().ok())
        .map(|l| absolute(url, l));
    match to {
        Some(to) if origin(&to) == origin(url) && redirects < MAX_REDIRECTS => Ok(to),
        Some(to) => Err(PromError::Config(format!(
            "{url} redirected `{query}` to {}: gpuwise follows redirects only on the same host (its credentials and headers go nowhere else); use the final URL",
            split_credentials(&to).0
        ))),
        None => Err(PromError::Config(format!(
            "{url} answered {} without a Location",
            resp.status().as_u16()
        ))),
    }
}

fn secs(ms: EpochMs) -> String {
    format!("{}.{:03}", ms.div_euclid(1000), ms.rem_euclid(1000))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_of_basic_auth() {
        // RFC 7617's example credentials.
        assert_eq!(
            base64::engine::general_purpose::STANDARD.encode("Aladdin:open sesame"),
            "QWxhZGRpbjpvcGVuIHNlc2FtZQ=="
        );
    }

    #[test]
    fn seconds_with_millis() {
        assert_eq!(secs(1_767_571_200_123), "1767571200.123");
        assert_eq!(secs(5), "0.005");
    }

    /// A one-connection-per-response HTTP server answering `responses` in order.
    fn fake(responses: Vec<(u16, &'static str)>) -> (String, std::thread::JoinHandle<Vec<String>>) {
        fake_with(
            responses
                .into_iter()
                .map(|(s, b)| (s, String::new(), b.to_owned()))
                .collect(),
        )
    }

    /// Like `fake`, with extra header lines (`Name: value\r\n…`) per response.
    fn fake_with(
        responses: Vec<(u16, String, String)>,
    ) -> (String, std::thread::JoinHandle<Vec<String>>) {
        use std::io::{BufRead as _, BufReader, Read as _, Write as _};
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let url = format!("http://{}", l.local_addr().expect("addr"));
        let h = std::thread::spawn(move || {
            let mut heads = Vec::new();
            for (status, extra, body) in responses {
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
                    "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{extra}Connection: close\r\n\r\n{body}",
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
    fn credentials_in_the_url_become_basic_auth_and_never_appear_in_messages() {
        let (url, h) = fake(vec![(401, "bad password for s3cret-pw, key k3y-123")]);
        let c = Client::new(ClientOptions {
            url: url.replace("http://", "http://alice:s3cret-pw@"),
            timeout: Duration::from_secs(5),
            headers: vec![("X-Api-Key".into(), "k3y-123".into())],
            ..ClientOptions::default()
        })
        .expect("client");
        assert_eq!(c.url(), url);
        let e = c.query("up", 0).expect_err("401").to_string();
        assert!(!e.contains("s3cret-pw") && !e.contains("k3y-123"), "{e}");
        assert!(e.contains("bad password for ***, key ***"), "{e}");
        let head = h.join().expect("server").remove(0).to_ascii_lowercase();
        // base64("alice:s3cret-pw"), sent to this host only.
        assert!(
            head.contains("authorization: basic ywxpy2u6cznjcmv0lxb3"),
            "{head}"
        );
        let (clean, creds) = split_credentials("https://a%40b:p%3Ass@mimir.example:443/prom?x=1");
        assert_eq!(clean, "https://mimir.example:443/prom?x=1");
        assert_eq!(creds, Some(("a@b".to_owned(), "p:ss".to_owned())));
    }

    #[test]
    fn redirects_are_followed_on_the_same_host_only() {
        // Same host: followed, headers kept.
        let (url, h) = fake_with(vec![
            (
                307,
                "Location: /prefix/api/v1/query\r\n".to_owned(),
                String::new(),
            ),
            (200, String::new(), OK.to_owned()),
        ]);
        let c = client(url, 0);
        c.query("up", 0).expect("followed");
        let heads = h.join().expect("server");
        assert!(
            heads[1].starts_with("POST /prefix/api/v1/query "),
            "{}",
            heads[1]
        );
        assert!(
            heads[1]
                .to_ascii_lowercase()
                .contains("x-scope-orgid: team-a")
        );
        // Another host: refused, nothing sent there.
        let (url, h) = fake_with(vec![(
            302,
            "Location: http://elsewhere.invalid:9090/api/v1/query\r\n".to_owned(),
            String::new(),
        )]);
        let c = client(url, 0);
        let e = c.query("up", 0).expect_err("cross-host").to_string();
        assert!(
            e.contains("redirected `up` to http://elsewhere.invalid:9090"),
            "{e}"
        );
        assert!(e.contains("only on the same host"), "{e}");
        assert_eq!(h.join().expect("server").len(), 1);
    }

    #[test]
    fn retry_after_is_honoured_within_a_bound() {
        let (url, h) = fake_with(vec![
            (429, "Retry-After: 1\r\n".to_owned(), "slow down".to_owned()),
            (200, String::new(), OK.to_owned()),
        ]);
        let c = client(url, 1);
        let t = std::time::Instant::now();
        c.query("up", 0).expect("second try");
        assert!(
            t.elapsed() >= Duration::from_millis(950),
            "{:?}",
            t.elapsed()
        );
        h.join().expect("server");
        let now = jiff::Timestamp::from_second(1_767_607_200).expect("ts");
        assert_eq!(retry_after("120", now), Some(Duration::from_secs(120)));
        assert_eq!(
            retry_after("Mon, 05 Jan 2026 10:00:30 GMT", now),
            Some(Duration::from_secs(30))
        );
        assert_eq!(retry_after("soon", now), None);
    }

    #[test]
    fn a_response_over_the_limit_is_stopped_while_reading() {
        let big = format!(
            "{{\"status\":\"success\",\"data\":{{\"resultType\":\"vector\",\"result\":[]}},\"pad\":\"{}\"}}",
            "x".repeat(4096)
        );
        let (url, h) = fake_with(vec![(200, String::new(), big)]);
        let c = Client::new(ClientOptions {
            url,
            timeout: Duration::from_secs(5),
            max_response_bytes: 1024,
            ..ClientOptions::default()
        })
        .expect("client");
        let e = c.query("up", 0).expect_err("too large");
        assert!(matches!(e, PromError::TooLarge { limit: 1024, .. }), "{e}");
        h.join().expect("server");
    }

    #[test]
    fn a_zero_timeout_is_refused() {
        let e = Client::new(ClientOptions {
            url: "http://127.0.0.1:9090".into(),
            ..ClientOptions::default()
        })
        .err()
        .expect("refused");
        assert!(e.to_string().contains("timeout"), "{e}");
    }

    #[test]
    fn a_ca_file_without_a_certificate_is_refused() {
        let e = Client::new(ClientOptions {
            url: "https://prometheus:9090".into(),
            ca_pem: Some(b"not a certificate".to_vec()),
            timeout: Duration::from_secs(1),
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
                timeout: Duration::from_secs(1),
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
