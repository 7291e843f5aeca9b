//! # `gpuwise serve`: the live dashboard, the JSON API and `/metrics`
//!
//! The edge that answers HTTP. Telemetry comes from files read as they grow ([`live`]: each
//! input's samples kept in tiles of time, so a window is a join of accumulators, never a
//! rescan) or from a Prometheus-compatible store (a function the binary gives that pulls a
//! window's device profiles, called per window and cached for the refresh interval). What a
//! window's profiles mean (the report, the advice, the allocation, the budgets) is asked of the
//! [`gpuwise_analysis::Analysis`] the server holds, the library every command asks too, so the
//! API's JSON is the CLI's, byte for byte. Rendering is `gpuwise-render`'s.
//!
//! Routes: `/` (the dashboard), `/device?id=…` (one device), `/api/report`, `/api/advice` and
//! `/api/allocation` (`gpuwise.report/v1`, `gpuwise.advice/v1`, `gpuwise.allocation/v1`), `/metrics` (OpenMetrics), `/healthz`. Each
//! takes `?last=7d` or `?start=…&end=…`. Nothing changes state.
//!
//! Security: a listener that is not on a loopback address needs a bearer token (compared in
//! constant time) or the server refuses to start; no CORS headers; a content security policy
//! that allows nothing from elsewhere; a time limit per request.

mod cache;
pub mod dashboard;
pub mod live;
pub mod metrics;
mod quota;
pub mod window;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{Duration, Instant};

use crate::dashboard::View;
use axum::Router;
use axum::extract::{Query, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use gpuwise_analysis::{Advice, Analysis, Burn, DeviceProfile, IngestSummary, Report};
use gpuwise_render::{Format, RenderOptions};
use serde::Deserialize;

pub use live::{Latest, Live};
pub use window::Span;

/// An error a function the binary gives may return.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// What the server shows for one window.
#[derive(Debug)]
pub struct Analysed {
    /// The report.
    pub report: Report,
    /// The advice.
    pub advice: Option<Advice>,
    /// The devices' profiles (the device pages' charts).
    pub profiles: Vec<DeviceProfile>,
    /// The report as `gpuwise report --format json` prints it (not for `/metrics`).
    pub report_json: Option<String>,
    /// The advice as `gpuwise advise --format json` prints it.
    pub advice_json: Option<String>,
    /// The allocation as `gpuwise allocate --format json` prints it.
    pub allocation_json: Option<String>,
    /// Budget burn per team (with a policy that has budgets).
    pub budgets: Vec<Burn>,
}

/// How much of a window's analysis a request needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Depth {
    /// The report, and the budgets' burn where a policy sets budgets (`/metrics`): no JSON,
    /// no advice, no allocation beyond what the budgets need.
    Report,
    /// Everything the pages and the API show.
    Full,
}

impl Depth {
    fn suffix(self) -> &'static str {
        match self {
            Self::Report => "#report",
            Self::Full => "#full",
        }
    }
}

/// Asks a store for a window: its devices' profiles and what was read.
pub type StoreFn =
    dyn Fn(&Span) -> Result<(Vec<DeviceProfile>, IngestSummary), BoxError> + Send + Sync;
/// What `gpuwise jobs` says for a window: its JSON (`gpuwise.jobs/v1`) and its HTML page.
/// The binary joins the job records it was given with the window's telemetry (samples, not
/// the profiles the server keeps), afresh for each request.
pub type JobsFn = dyn Fn(&Span) -> Result<JobsAnswer, BoxError> + Send + Sync;

/// A window's jobs, drawn.
#[derive(Clone, Debug)]
pub struct JobsAnswer {
    /// As `gpuwise jobs --format json` prints it.
    pub json: String,
    /// As `gpuwise jobs --format html` prints it.
    pub html: String,
}

/// The time now, Unix milliseconds (the binary's clock, which a test may pin).
pub type Clock = Arc<dyn Fn() -> i64 + Send + Sync>;

/// Where telemetry comes from.
pub enum Telemetry {
    /// Files read as they grow.
    Files {
        /// What was read.
        live: Box<Live>,
    },
    /// A Prometheus-compatible store, asked per window.
    Store(Box<StoreFn>),
}

/// How the server runs.
#[derive(Clone, Debug)]
pub struct Options {
    /// The address to listen on.
    pub listen: SocketAddr,
    /// The bearer token every request but `/healthz` must carry.
    pub token: Option<String>,
    /// Host names requests may name besides localhost, 127.0.0.1, `[::1]` and the address
    /// listened on (a `Host` naming anything else is a DNS-rebinding page: 421).
    pub allowed_hosts: Vec<String>,
    /// How often files are looked at again (and a store's answers kept).
    pub refresh: Duration,
    /// The longest a request may take.
    pub request_timeout: Duration,
    /// Distinct windows one client may ask of a store in a minute.
    pub store_windows_per_minute: usize,
    /// Serve HTTPS with this certificate chain and key (PEM files), else plain HTTP.
    pub tls: Option<TlsFiles>,
}

/// A certificate chain and its private key, PEM files.
#[derive(Clone, Debug)]
pub struct TlsFiles {
    /// The certificate chain, the server's first.
    pub cert: std::path::PathBuf,
    /// The private key (PKCS#8, PKCS#1 or SEC1).
    pub key: std::path::PathBuf,
}

/// The TLS acceptor of `files`, or what is wrong with them.
fn tls_acceptor(files: &TlsFiles) -> Result<tokio_rustls::TlsAcceptor, ServeError> {
    use rustls_pki_types::pem::PemObject as _;
    use tokio_rustls::rustls;
    let bad = |flag: &str, path: &std::path::Path, why: String| {
        ServeError::Tls(format!("--{flag} `{}`: {why}", path.display()))
    };
    let read = |flag: &str, path: &std::path::Path| {
        std::fs::read(path).map_err(|e| bad(flag, path, e.to_string()))
    };
    let cert_pem = read("tls-cert", &files.cert)?;
    let certs = rustls_pki_types::CertificateDer::pem_slice_iter(&cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| {
            bad(
                "tls-cert",
                &files.cert,
                format!("not a PEM certificate chain ({e})"),
            )
        })?;
    if certs.is_empty() {
        return Err(bad("tls-cert", &files.cert, "holds no certificate".into()));
    }
    let key_pem = read("tls-key", &files.key)?;
    let key = rustls_pki_types::PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| {
        bad(
            "tls-key",
            &files.key,
            format!("not a PEM private key ({e})"),
        )
    })?;
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| ServeError::Tls(e.to_string()))?
    .with_no_client_auth()
    .with_single_cert(certs, key)
    .map_err(|e| {
        ServeError::Tls(format!(
            "--tls-cert and --tls-key do not make a certificate and its key: {e}"
        ))
    })?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
}

/// Why the server cannot start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// A listener others can reach, without a token.
    #[error(
        "{0} is not a loopback address: other machines could read the fleet's costs. Give a token (--token-env VAR) or listen on 127.0.0.1"
    )]
    NeedsToken(SocketAddr),
    /// The token is empty.
    #[error("the token is empty")]
    EmptyToken,
    /// The address cannot be listened on (taken, or not this machine's).
    #[error("cannot listen on {addr}: {why}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// What the system said (not a `source`: the message says it once).
        why: std::io::Error,
    },
    /// The certificate or key cannot be used.
    #[error("{0}")]
    Tls(String),
    /// The address cannot be bound, or the runtime cannot start.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// A bound server, ready to run.
pub struct Server {
    listener: std::net::TcpListener,
    tls: Option<tokio_rustls::TlsAcceptor>,
    state: Arc<AppState>,
}

struct AppState {
    source: Source,
    /// What a window's profiles mean.
    analysis: Arc<Analysis>,
    /// The time the analyses are made at.
    clock: Clock,
    opts: Options,
    /// Analyses by window (LRU, one computation per window at a time, bounded turns).
    windows: cache::Windows<Analysed, Failure>,
    refresh_note: Mutex<RefreshNote>,
    /// The last analysis that failed, and why (internal detail: shown to who may read the
    /// dashboard, never in an error body).
    last_error: Mutex<Option<String>>,
    /// The session cookie's value while a token is required: drawn at start, so a restart
    /// signs everyone out.
    session: Option<String>,
    started: Instant,
    /// Analyses computed to the report alone (`/metrics` asked first).
    report_only: std::sync::atomic::AtomicU64,
    /// Distinct windows each client asked of a store in the last minute.
    store_quota: quota::StoreQuota,
    /// The jobs of a window (`/api/jobs`, `/jobs`), where job records were given.
    jobs: Option<Box<JobsFn>>,
}

enum Source {
    Files { live: Box<RwLock<Live>> },
    Store(Box<StoreFn>),
}

#[derive(Default)]
struct RefreshNote {
    at: Option<jiff::Timestamp>,
    problem: Option<String>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Entries kept in the window cache (each a report and its advice).
const CACHE_ENTRIES: usize = 32;

/// A listener bound with its checked options, before any telemetry is read: a taken port or
/// a missing token is said at once, not after minutes of reading the fleet.
pub struct Bound {
    listener: std::net::TcpListener,
    tls: Option<tokio_rustls::TlsAcceptor>,
    opts: Options,
}

impl Bound {
    /// Check the options and bind the listener.
    pub fn new(opts: Options) -> Result<Self, ServeError> {
        match &opts.token {
            None if !opts.listen.ip().is_loopback() => {
                return Err(ServeError::NeedsToken(opts.listen));
            }
            Some(t) if t.is_empty() => return Err(ServeError::EmptyToken),
            _ => {}
        }
        let tls = opts.tls.as_ref().map(tls_acceptor).transpose()?;
        let listener =
            std::net::TcpListener::bind(opts.listen).map_err(|why| ServeError::Bind {
                addr: opts.listen,
                why,
            })?;
        listener.set_nonblocking(true)?;
        Ok(Self {
            listener,
            tls,
            opts,
        })
    }

    /// Whether it serves HTTPS.
    #[must_use]
    pub fn is_tls(&self) -> bool {
        self.tls.is_some()
    }

    /// The server, with what it serves: telemetry, asked of `analysis` at `clock`'s time.
    #[must_use]
    pub fn serve(self, telemetry: Telemetry, analysis: Arc<Analysis>, clock: Clock) -> Server {
        Server::with(self, telemetry, analysis, clock, None)
    }

    /// [`Bound::serve`], with the jobs of each window (`/api/jobs`, `/jobs`).
    #[must_use]
    pub fn serve_with_jobs(
        self,
        telemetry: Telemetry,
        analysis: Arc<Analysis>,
        clock: Clock,
        jobs: Box<JobsFn>,
    ) -> Server {
        Server::with(self, telemetry, analysis, clock, Some(jobs))
    }
}

impl Server {
    /// Check the options and bind the listener ([`Bound::new`], then [`Bound::serve`]).
    pub fn bind(
        opts: Options,
        telemetry: Telemetry,
        analysis: Arc<Analysis>,
        clock: Clock,
    ) -> Result<Self, ServeError> {
        Ok(Bound::new(opts)?.serve(telemetry, analysis, clock))
    }

    fn with(
        bound: Bound,
        telemetry: Telemetry,
        analysis: Arc<Analysis>,
        clock: Clock,
        jobs: Option<Box<JobsFn>>,
    ) -> Self {
        let Bound {
            listener,
            tls,
            opts,
        } = bound;
        let source = match telemetry {
            Telemetry::Files { live } => Source::Files {
                live: Box::new(RwLock::new(*live)),
            },
            Telemetry::Store(f) => Source::Store(f),
        };
        let session = opts.token.as_ref().map(|_| session_value());
        let store_quota = quota::StoreQuota::new(opts.store_windows_per_minute);
        let state = Arc::new(AppState {
            source,
            analysis,
            clock,
            opts,
            store_quota,
            windows: cache::Windows::new(
                CACHE_ENTRIES,
                std::thread::available_parallelism().map_or(2, std::num::NonZeroUsize::get),
            ),
            started: Instant::now(),
            report_only: std::sync::atomic::AtomicU64::new(0),
            refresh_note: Mutex::new(RefreshNote {
                at: Some(jiff::Timestamp::now()),
                problem: None,
            }),
            last_error: Mutex::new(None),
            session,
            jobs,
        });
        Self {
            listener,
            tls,
            state,
        }
    }

    /// The address bound (the port, when asked for port 0).
    pub fn local_addr(&self) -> Result<SocketAddr, ServeError> {
        Ok(self.listener.local_addr()?)
    }

    /// Serve until SIGINT or SIGTERM; files are looked at again every refresh interval.
    pub fn run(self) -> Result<(), ServeError> {
        let state = self.state;
        if matches!(state.source, Source::Files { .. }) {
            let s = state.clone();
            std::thread::Builder::new()
                .name("gpuwise-refresh".into())
                .spawn(move || refresh_loop(&s))?;
        }
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()?;
        let tls = self.tls;
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(self.listener)?;
            accept_loop(listener, tls, router(state)).await
        })?;
        Ok(())
    }
}

/// Connections served at once; more wait in the listen backlog until one ends or times out.
pub const MAX_CONNECTIONS: usize = 256;

/// The longest a connection may take to send a request's headers (and to start the next one
/// on a kept-alive connection) before it is closed: connections that never finish their
/// headers were held forever, and 300 of them made the server unreachable before any token
/// check.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Accept connections until SIGINT or SIGTERM, each served by hyper with the header-read
/// timeout (over TLS when an acceptor is given: the handshake bounded by the same time), at
/// most [`MAX_CONNECTIONS`] at once.
async fn accept_loop(
    listener: tokio::net::TcpListener,
    tls: Option<tokio_rustls::TlsAcceptor>,
    app: Router,
) -> std::io::Result<()> {
    let permits = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    let stop = shutdown();
    tokio::pin!(stop);
    loop {
        // At the cap, the next connection waits in the listen backlog for a slot (delayed,
        // not refused); a slot frees when a connection ends or times out.
        let permit = tokio::select! {
            p = permits.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => return Ok(()),
            },
            () = &mut stop => return Ok(()),
        };
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(c) => c,
                // A connection that failed before it was accepted (reset, out of descriptors
                // for a moment): the next one may do.
                Err(_) => continue,
            },
            () = &mut stop => return Ok(()),
        };
        let app = app.clone().layer(axum::Extension(Peer(peer.ip())));
        let tls = tls.clone();
        tokio::spawn(async move {
            match tls {
                None => serve_connection(stream, app).await,
                Some(acceptor) => {
                    // A handshake that does not finish in time, or fails, closes the
                    // connection (a plain-HTTP request to an HTTPS port among them).
                    let handshake =
                        tokio::time::timeout(HEADER_READ_TIMEOUT, acceptor.accept(stream));
                    if let Ok(Ok(stream)) = handshake.await {
                        serve_connection(stream, app).await;
                    }
                }
            }
            drop(permit);
        });
    }
}

/// Serve one connection's requests with the header-read timeout.
async fn serve_connection<I>(io: I, app: Router)
where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let service = hyper_util::service::TowerToHyperService::new(app);
    let _ = hyper::server::conn::http1::Builder::new()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT)
        .serve_connection(hyper_util::rt::TokioIo::new(io), service)
        .await;
}

fn refresh_loop(s: &AppState) {
    let Source::Files { live, .. } = &s.source else {
        return;
    };
    loop {
        std::thread::sleep(s.opts.refresh);
        // Listing and reading hold no write lock (requests are answered meanwhile); only
        // putting the pieces in place does.
        let look = live.read().unwrap_or_else(PoisonError::into_inner).look();
        let result = look.and_then(|look| {
            let found = look.read();
            live.write()
                .unwrap_or_else(PoisonError::into_inner)
                .apply(look, found)
        });
        let mut problem = result.as_ref().err().map(ToString::to_string);
        // What runs after a refresh (the history store's writes) reads under a read lock:
        // requests are answered meanwhile.
        if result.is_ok_and(|c| c.any()) {
            let l = live.read().unwrap_or_else(PoisonError::into_inner);
            if let Some(after) = l.after()
                && let Err(e) = after(&l)
            {
                problem = Some(e);
            }
        }
        let mut note = lock(&s.refresh_note);
        note.at = Some(jiff::Timestamp::now());
        note.problem = problem;
    }
}

async fn shutdown() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    {
        let term = async {
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(mut s) => {
                    s.recv().await;
                }
                Err(_) => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            () = ctrl_c => {},
            () = term => {},
        }
    }
    #[cfg(not(unix))]
    ctrl_c.await;
}

fn router(state: Arc<AppState>) -> Router {
    let timeout = state.opts.request_timeout;
    Router::new()
        .route("/", get(page))
        .route("/device", get(device))
        .route("/api/report", get(api_report))
        .route("/api/advice", get(api_advice))
        .route("/api/allocation", get(api_allocation))
        .route("/api/jobs", get(api_jobs))
        .route("/jobs", get(jobs_page))
        .route("/metrics", get(metrics_text))
        .route("/healthz", get(healthz))
        .route("/login", get(login_form).post(login))
        .route("/logout", axum::routing::post(logout))
        .layer(middleware::from_fn_with_state(state.clone(), guard))
        .layer(tower_http::timeout::TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            timeout,
        ))
        .with_state(state)
}

/// Equal without an early exit (`subtle`, as `record`'s /metrics token: the time taken does
/// not tell how much of a guess was right; the length may show, which a bearer token of fixed
/// length does not mind).
fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    use subtle::ConstantTimeEq as _;
    bool::from(a.ct_eq(b))
}

/// A request to `/healthz` without the token.
#[derive(Clone, Copy)]
struct Anonymous;

/// A request signed in with the session cookie (the dashboard shows "log out").
#[derive(Clone, Copy)]
struct SignedIn;

/// The session cookie's name.
const SESSION: &str = "gpuwise_session";

/// 32 random bytes as hex: the session cookie's value until the server stops.
fn session_value() -> String {
    use ring::rand::SecureRandom as _;
    let mut bytes = [0u8; 32];
    // The system's generator; should it fail, a value no browser holds (no one can sign in).
    if ring::rand::SystemRandom::new().fill(&mut bytes).is_err() {
        return "unavailable".to_owned();
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The session cookie's value in a request, if any.
fn session_cookie(headers: &axum::http::HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == SESSION)
        .map(|(_, v)| v)
}

/// The cookie that signs a browser in (`value`) or out (`None`): `HttpOnly` (no script reads
/// it), `SameSite=Strict` (no other site's page sends it), `Secure` when served over TLS, for
/// the whole server.
fn session_set_cookie(value: Option<&str>, secure: bool) -> HeaderValue {
    // Over TLS the browser is told never to send it in clear.
    let secure = if secure { "; Secure" } else { "" };
    let v = match value {
        Some(v) => format!("{SESSION}={v}; HttpOnly; SameSite=Strict; Path=/{secure}"),
        None => format!("{SESSION}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0{secure}"),
    };
    HeaderValue::from_str(&v).unwrap_or_else(|_| HeaderValue::from_static(""))
}

/// The token a sign-in form posts.
#[derive(Deserialize)]
struct LoginForm {
    token: String,
}

async fn login_form() -> Response {
    html(dashboard::login_page(false))
}

/// Check the posted token (in constant time); right, set the session cookie and go to the
/// dashboard; wrong, the form again with a 401.
async fn login(State(s): State<Arc<AppState>>, axum::Form(f): axum::Form<LoginForm>) -> Response {
    let (Some(token), Some(session)) = (&s.opts.token, &s.session) else {
        return axum::response::Redirect::to("./").into_response();
    };
    if !same_bytes(f.token.trim().as_bytes(), token.as_bytes()) {
        return (StatusCode::UNAUTHORIZED, html(dashboard::login_page(true))).into_response();
    }
    let mut r = axum::response::Redirect::to("./").into_response();
    r.headers_mut().insert(
        header::SET_COOKIE,
        session_set_cookie(Some(session), s.opts.tls.is_some()),
    );
    r
}

async fn logout(State(s): State<Arc<AppState>>) -> Response {
    let mut r = axum::response::Redirect::to("login").into_response();
    r.headers_mut().insert(
        header::SET_COOKIE,
        session_set_cookie(None, s.opts.tls.is_some()),
    );
    r
}

/// The token of an `Authorization: Bearer …` header; the scheme's case does not matter
/// (RFC 7235).
fn bearer(headers: &axum::http::HeaderMap) -> Option<&str> {
    let v = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = v.trim().split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

/// The content security policy: nothing from other origins, and of scripts only the
/// dashboard's own, by its SHA-256 (no `'unsafe-inline'`).
static CSP: std::sync::LazyLock<HeaderValue> = std::sync::LazyLock::new(|| {
    use base64::Engine as _;
    let digest = ring::digest::digest(&ring::digest::SHA256, dashboard::SCRIPT.as_bytes());
    let hash = base64::engine::general_purpose::STANDARD.encode(digest.as_ref());
    HeaderValue::from_str(&format!(
        "default-src 'none'; style-src 'unsafe-inline'; script-src 'sha256-{hash}'; img-src 'self' data:; connect-src 'self'; base-uri 'self'; form-action 'self'"
    ))
    .unwrap_or_else(|_| HeaderValue::from_static("default-src 'none'"))
});

/// The host a `Host` header names, without its port, in lower case (`[::1]` keeps its
/// brackets).
fn host_name(host: &str) -> String {
    let host = host.trim();
    let name = if let Some(rest) = host.strip_prefix('[') {
        rest.split_once(']')
            .map_or(host.to_owned(), |(ip, _)| format!("[{ip}]"))
    } else {
        host.rsplit_once(':')
            .filter(|(_, port)| port.bytes().all(|b| b.is_ascii_digit()))
            .map_or(host, |(name, _)| name)
            .to_owned()
    };
    name.to_ascii_lowercase()
}

/// Whether a request naming `host` may be answered: loopback names, the address listened on
/// (unless it is the unspecified address, which no client names) and `--allowed-host` names.
/// A page whose name an attacker made resolve to 127.0.0.1 sends its own name: refused, so it
/// cannot read the fleet same-origin.
fn host_allowed(host: &str, opts: &Options) -> bool {
    let name = host_name(host);
    let ip = opts.listen.ip();
    let bound = match ip {
        std::net::IpAddr::V6(v6) => format!("[{v6}]"),
        std::net::IpAddr::V4(v4) => v4.to_string(),
    };
    ["localhost", "127.0.0.1", "[::1]"].contains(&name.as_str())
        || (!ip.is_unspecified() && name == bound)
        || opts.allowed_hosts.iter().any(|a| host_name(a) == name)
}

/// The host check, the token check (all but `/healthz`) and the headers every answer carries.
async fn guard(State(s): State<Arc<AppState>>, mut req: Request, next: Next) -> Response {
    // A request without a Host header (HTTP/1.0) is no browser's: browsers always send it.
    if let Some(host) = req
        .headers()
        .get(header::HOST)
        .map(|h| h.to_str().unwrap_or("\u{fffd}"))
        && !host_allowed(host, &s.opts)
    {
        return Failure(
            StatusCode::MISDIRECTED_REQUEST,
            "this server does not answer for that host name; start it with --allowed-host NAME \
             to reach it by a name other than localhost or its address"
                .into(),
        )
        .into_response();
    }
    if let Some(token) = &s.opts.token {
        let given = bearer(req.headers()).unwrap_or("");
        let signed_in = s.session.as_deref().is_some_and(|v| {
            session_cookie(req.headers()).is_some_and(|c| same_bytes(c.as_bytes(), v.as_bytes()))
        });
        let path = req.uri().path();
        if signed_in {
            req.extensions_mut().insert(SignedIn);
        } else if !same_bytes(given.as_bytes(), token.as_bytes())
            // Signing in and out need no credentials: one checks the token, the other only
            // clears a cookie.
            && !matches!(path, "/login" | "/logout")
        {
            if matches!(path, "/" | "/device") && req.method() == axum::http::Method::GET {
                // A person at a browser: the sign-in form, not a bare 401.
                return axum::response::Redirect::to("login").into_response();
            }
            if path == "/healthz" {
                // Health without the token: whether it is up, never what went wrong (a
                // refresh error names paths).
                req.extensions_mut().insert(Anonymous);
            } else {
                let mut r =
                    (StatusCode::UNAUTHORIZED, "a bearer token is required\n").into_response();
                r.headers_mut()
                    .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
                return r;
            }
        }
    }
    let mut r = next.run(req).await;
    let h = r.headers_mut();
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(header::CONTENT_SECURITY_POLICY, CSP.clone());
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

/// A request's window (and, for a device page, the device).
#[derive(Debug, Default, Deserialize)]
struct Q {
    start: Option<String>,
    end: Option<String>,
    last: Option<String>,
    id: Option<String>,
    /// The client's address (from the connection, not the query).
    #[serde(skip)]
    client: Option<std::net::IpAddr>,
}

/// The address a connection comes from, put on each of its requests.
#[derive(Clone, Copy, Debug)]
struct Peer(std::net::IpAddr);

impl Q {
    fn span(&self) -> Result<Span, window::BadWindow> {
        window::span(
            self.start.as_deref(),
            self.end.as_deref(),
            self.last.as_deref(),
        )
    }

    fn query(&self) -> String {
        window::query(
            self.start.as_deref(),
            self.end.as_deref(),
            self.last.as_deref(),
        )
    }
}

/// A request's query, or a JSON 400 naming what is wrong with it (axum's own rejection is
/// plain text: a repeated parameter got one).
struct Window(Q);

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for Window {
    type Rejection = Failure;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &S,
    ) -> Result<Self, Self::Rejection> {
        let client = parts.extensions.get::<Peer>().map(|p| p.0);
        Query::<Q>::from_request_parts(parts, state)
            .await
            .map(|Query(q)| Window(Q { client, ..q }))
            .map_err(|e| Failure(StatusCode::BAD_REQUEST, e.body_text()))
    }
}

/// A request that cannot be answered, as a status and a JSON message.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Failure(StatusCode, String);

impl IntoResponse for Failure {
    fn into_response(self) -> Response {
        let body = serde_json::json!({ "error": self.1 }).to_string();
        (
            self.0,
            [(header::CONTENT_TYPE, "application/json")],
            body + "\n",
        )
            .into_response()
    }
}

/// The analysis of a window and the window in words.
struct Answer {
    analysis: Arc<Analysed>,
    window: String,
    generation: u64,
}

impl AppState {
    /// The analysis of `span`, from the cache while the data has not changed (files) or for
    /// the refresh interval (a store).
    /// The window's analysis to `depth`: a full one kept serves a report-only request too.
    fn cached(
        &self,
        base: &str,
        depth: Depth,
        fresh: &dyn Fn(Instant) -> bool,
        compute: impl FnOnce() -> Result<Analysed, Failure>,
    ) -> Result<Arc<Analysed>, Failure> {
        let full = format!("{base}{}", Depth::Full.suffix());
        if depth == Depth::Report
            && let Some(a) = self.windows.peek(&full, fresh)
        {
            return Ok(a);
        }
        self.windows
            .get_or_compute(&format!("{base}{}", depth.suffix()), fresh, || {
                if depth == Depth::Report {
                    self.report_only
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                compute()
            })
    }

    fn answer(
        &self,
        span: &Span,
        depth: Depth,
        client: Option<std::net::IpAddr>,
    ) -> Result<Answer, Failure> {
        match &self.source {
            Source::Files { live } => {
                let (generation, tile, a, b) = {
                    let live = live.read().unwrap_or_else(PoisonError::into_inner);
                    let generation = live.generation();
                    let tile = live.tile_ms();
                    let (Some((first, end)), Some(last)) = (live.tiles(), live.last_ms()) else {
                        return Err(Failure(StatusCode::NOT_FOUND, "no samples read yet".into()));
                    };
                    // A window asked for reaches back into the history store; the default
                    // (everything kept) is what the files hold.
                    let first = match span {
                        Span::All => first,
                        _ => live.reach().map_or(first, |r| r.min(first)),
                    };
                    let Some((a, b)) = window::tiles(span, first, end, last, tile) else {
                        return Err(Failure(
                            StatusCode::NOT_FOUND,
                            "no samples in the window".into(),
                        ));
                    };
                    (generation, tile, a, b)
                };
                // The data generation is in the key: a refresh that read something makes every
                // window new.
                let key = format!("{a}..{b}@{generation}");
                let analysis = self.cached(&key, depth, &|_| true, || {
                    let w = live
                        .read()
                        .unwrap_or_else(PoisonError::into_inner)
                        .window(a, b)
                        .map_err(|e| self.internal("reading the window", e))?;
                    // A window whose samples cover no time (one sample per device, as a tile
                    // that holds only a midnight sample) has nothing to report: a 404, never $0.
                    if w.profile.is_empty() || w.profile.covered_ms() == 0 {
                        return Err(Failure(
                            StatusCode::NOT_FOUND,
                            "no samples in the window".into(),
                        ));
                    }
                    let profiles = self.analysis.profiles(w.profile);
                    self.analysed(profiles, w.summary, depth)
                })?;
                Ok(Answer {
                    analysis,
                    window: tile_words(a, b, tile),
                    generation,
                })
            }
            Source::Store(query) => {
                let key = format!("{span:?}");
                let refresh = self.opts.refresh;
                let fresh = |made: Instant| made.elapsed() < refresh;
                // A window not answered yet is a query against the store: counted per client.
                let kept = [Depth::Full, depth].iter().any(|d| {
                    self.windows
                        .peek(&format!("{key}{}", d.suffix()), &fresh)
                        .is_some()
                });
                if !kept && let Err(wait) = self.store_quota.admit(client, &key, Instant::now()) {
                    return Err(Failure(
                        StatusCode::TOO_MANY_REQUESTS,
                        format!(
                            "more than {} distinct windows asked of the store in a minute from this address: ask again in {wait} s (windows already answered are not counted; --store-windows-per-minute)",
                            self.opts.store_windows_per_minute
                        ),
                    ));
                }
                let analysis = self.cached(
                    &key,
                    depth,
                    &|made: Instant| made.elapsed() < refresh,
                    || {
                        let (mut profiles, summary) = query(span)
                            .map_err(|e| Failure(StatusCode::BAD_GATEWAY, e.to_string()))?;
                        self.analysis.with_workloads(&mut profiles);
                        self.analysed(profiles, summary, depth)
                    },
                )?;
                Ok(Answer {
                    window: store_words(&analysis.report),
                    analysis,
                    generation: self.store_generation(),
                })
            }
        }
    }

    /// What the server shows for a window's profiles, to `depth` (see [`Depth`]): the
    /// report always; the budgets' burn where a policy sets budgets; for [`Depth::Full`] the
    /// report's, the advice's and the allocation's JSON as the CLI prints them.
    fn analysed(
        &self,
        profiles: Vec<DeviceProfile>,
        summary: IngestSummary,
        depth: Depth,
    ) -> Result<Analysed, Failure> {
        let a = &self.analysis;
        // One reading of the clock for the whole window: its report and allocation agree on
        // what "now" (the current month, the forecast) is.
        let now = (self.clock)();
        let report = a.report(&profiles, summary, now);
        let plain = RenderOptions {
            top: 10,
            color: false,
        };
        if depth == Depth::Report {
            // /metrics: the budgets' burn only where the policy sets budgets.
            let budgets = if a.settings().budget.is_some() {
                a.budgets(&a.allocate(&report, &profiles, now))
            } else {
                Vec::new()
            };
            return Ok(Analysed {
                report,
                advice: None,
                profiles,
                report_json: None,
                advice_json: None,
                allocation_json: None,
                budgets,
            });
        }
        let mut report_json = Vec::new();
        let doc = gpuwise_analysis::view::Document {
            report: &report,
            advice: None,
        };
        gpuwise_analysis::view::write(&doc, Format::Json, &plain, &mut report_json)
            .map_err(|e| self.internal("rendering the report", e))?;
        let report_json =
            String::from_utf8(report_json).map_err(|e| self.internal("rendering the report", e))?;
        let advice = a.advice(&report, &profiles);
        let advice_json = gpuwise_analysis::view::advice::render(&advice, Format::Json, &plain);
        let allocation = a.allocate(&report, &profiles, now);
        let allocation_json =
            gpuwise_analysis::view::ledger::allocation(&allocation, Format::Json, &plain)
                .map_err(|e| self.internal("rendering the allocation", e))?;
        let budgets = a.budgets(&allocation);
        Ok(Analysed {
            report,
            advice: Some(advice),
            profiles,
            report_json: Some(report_json),
            advice_json: Some(advice_json),
            allocation_json: Some(allocation_json),
            budgets,
        })
    }

    /// A store's data has no generation of its own: it counts refresh intervals, so the page
    /// reloads once per interval.
    fn store_generation(&self) -> u64 {
        let every = self.opts.refresh.as_millis().max(1);
        u64::try_from(self.started.elapsed().as_millis() / every).unwrap_or(u64::MAX)
    }

    /// A failure whose detail (paths, internal errors) stays on the server: kept for the
    /// dashboard's status line, and the answer says only what failed.
    fn internal(&self, what: &str, e: impl std::fmt::Display) -> Failure {
        *lock(&self.last_error) = Some(format!("{what}: {e}"));
        Failure(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("{what} failed; the dashboard's status line says why"),
        )
    }

    fn status(&self) -> (String, Option<String>) {
        let last_error = lock(&self.last_error).clone();
        let note = lock(&self.refresh_note);
        let refreshed = note.at.map_or("not yet".into(), |t| {
            t.strftime("%Y-%m-%d %H:%M:%S UTC").to_string()
        });
        let what = match &self.source {
            Source::Files { .. } => "files",
            Source::Store(_) => "store",
        };
        (
            format!(
                "{what} looked at {refreshed}, every {} s",
                self.opts.refresh.as_secs()
            ),
            note.problem.clone().or(last_error),
        )
    }
}

fn tile_words(a: i64, b: i64, tile_ms: u64) -> String {
    let t = i64::try_from(tile_ms).unwrap_or(i64::MAX);
    let at = |tile: i64| {
        jiff::Timestamp::from_millisecond(tile.saturating_mul(t)).map_or_else(
            |_| "?".into(),
            |ts| ts.strftime("%Y-%m-%d %H:%M").to_string(),
        )
    };
    let unit = if tile_ms.is_multiple_of(86_400_000) {
        "whole UTC days"
    } else {
        "whole tiles"
    };
    format!("{} → {} UTC ({unit})", at(a), at(b))
}

fn store_words(r: &Report) -> String {
    match (&r.window.start, &r.window.end) {
        (Some(a), Some(b)) => format!("{a} → {b}"),
        _ => "no data".into(),
    }
}

/// Run the blocking work of a request on a blocking thread.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, Failure> + Send + 'static,
) -> Result<T, Failure> {
    tokio::task::spawn_blocking(f).await.map_err(|_| {
        Failure(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the request's work stopped unexpectedly".into(),
        )
    })?
}

async fn answer_for(s: &Arc<AppState>, q: &Q) -> Result<Answer, Failure> {
    answer_to(s, q, Depth::Full).await
}

async fn answer_to(s: &Arc<AppState>, q: &Q, depth: Depth) -> Result<Answer, Failure> {
    let span = q
        .span()
        .map_err(|e| Failure(StatusCode::BAD_REQUEST, e.to_string()))?;
    let s = s.clone();
    let client = q.client;
    blocking(move || s.answer(&span, depth, client)).await
}

fn json(body: String) -> Response {
    ([(header::CONTENT_TYPE, "application/json")], body).into_response()
}

async fn api_report(State(s): State<Arc<AppState>>, Window(q): Window) -> Response {
    match answer_for(&s, &q).await {
        Ok(a) => match &a.analysis.report_json {
            Some(j) => json(j.clone()),
            None => Failure(
                StatusCode::INTERNAL_SERVER_ERROR,
                "the report was not rendered".into(),
            )
            .into_response(),
        },
        Err(f) => f.into_response(),
    }
}

async fn api_advice(State(s): State<Arc<AppState>>, Window(q): Window) -> Response {
    match answer_for(&s, &q).await {
        Ok(a) => match &a.analysis.advice_json {
            Some(j) => json(j.clone()),
            None => {
                Failure(StatusCode::NOT_FOUND, "no advice for this window".into()).into_response()
            }
        },
        Err(f) => f.into_response(),
    }
}

async fn api_allocation(State(s): State<Arc<AppState>>, Window(q): Window) -> Response {
    match answer_for(&s, &q).await {
        Ok(a) => match &a.analysis.allocation_json {
            Some(j) => json(j.clone()),
            None => Failure(
                StatusCode::NOT_FOUND,
                "no allocation for this window".into(),
            )
            .into_response(),
        },
        Err(f) => f.into_response(),
    }
}

/// The jobs of the request's window, joined afresh (the join reads samples; the server keeps
/// profiles): 404 where serve was given no job records.
async fn jobs_answer(s: &Arc<AppState>, q: &Q) -> Result<JobsAnswer, Failure> {
    if s.jobs.is_none() {
        return Err(Failure(
            StatusCode::NOT_FOUND,
            "no job records: start serve with --sacct, --slurm, --kube, --mlflow or --runs-csv"
                .into(),
        ));
    }
    let mut span = q
        .span()
        .map_err(|e| Failure(StatusCode::BAD_REQUEST, e.to_string()))?;
    // `last` ends at the newest sample read, as the dashboard's windows do.
    if let (Span::Last(ms), Source::Files { live }) = (&span, &s.source)
        && let Some(newest) = live
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .last_ms()
    {
        let back = i64::try_from(*ms).unwrap_or(i64::MAX);
        span = Span::Range(Some(newest.saturating_sub(back)), Some(newest + 1));
    }
    // Each answer reads the window's samples again: distinct windows are counted per client,
    // as a store's are.
    if let Err(wait) = s
        .store_quota
        .admit(q.client, &format!("jobs {span:?}"), Instant::now())
    {
        return Err(Failure(
            StatusCode::TOO_MANY_REQUESTS,
            format!(
                "more than {} distinct windows of jobs asked in a minute from this address: ask again in {wait} s (--store-windows-per-minute)",
                s.opts.store_windows_per_minute
            ),
        ));
    }
    let s = s.clone();
    blocking(move || {
        let f = s
            .jobs
            .as_ref()
            .ok_or_else(|| Failure(StatusCode::NOT_FOUND, "no job records".into()))?;
        f(&span).map_err(|e| {
            // The detail (a file, a store) is for who may read the dashboard, not the body.
            *lock(&s.last_error) = Some(e.to_string());
            Failure(
                StatusCode::INTERNAL_SERVER_ERROR,
                "the jobs of this window could not be joined (see the dashboard's status)".into(),
            )
        })
    })
    .await
}

async fn api_jobs(State(s): State<Arc<AppState>>, Window(q): Window) -> Response {
    match jobs_answer(&s, &q).await {
        Ok(a) => json(a.json),
        Err(f) => f.into_response(),
    }
}

async fn jobs_page(State(s): State<Arc<AppState>>, Window(q): Window) -> Response {
    match jobs_answer(&s, &q).await {
        Ok(a) => html(a.html),
        Err(f) => f.into_response(),
    }
}

async fn metrics_text(State(s): State<Arc<AppState>>, Window(q): Window) -> Response {
    // The report (and, with a budget policy, the budgets' burn) is all /metrics exposes: no
    // advice is computed for it.
    match answer_to(&s, &q, Depth::Report).await {
        Ok(a) => (
            [(
                header::CONTENT_TYPE,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )],
            metrics::text(
                &a.analysis.report,
                &a.analysis.profiles,
                &a.analysis.budgets,
                a.generation,
            ),
        )
            .into_response(),
        Err(f) => f.into_response(),
    }
}

async fn healthz(
    State(s): State<Arc<AppState>>,
    anonymous: Option<axum::Extension<Anonymous>>,
) -> Response {
    let s2 = s.clone();
    let anonymous = anonymous.is_some();
    let body = blocking(move || {
        let (generation, reads) = match &s2.source {
            Source::Files { live, .. } => {
                let l = live.read().unwrap_or_else(PoisonError::into_inner);
                (l.generation(), serde_json::to_value(l.reads()).ok())
            }
            Source::Store(_) => (s2.store_generation(), None),
        };
        let (status, problem) = s2.status();
        if anonymous {
            return Ok(serde_json::json!({
                "status": "ok",
                "generation": generation,
                "problem": problem.map(|_| "something failed: /healthz with the token says what"),
            })
            .to_string());
        }
        Ok(serde_json::json!({
            "status": "ok",
            "generation": generation,
            "reads": reads,
            "data": status,
            "problem": problem,
            "analyses": {
                "computed": s2.windows.computed(),
                "report_only": s2.report_only.load(std::sync::atomic::Ordering::Relaxed),
                "kept": s2.windows.len(),
            },
        })
        .to_string())
    })
    .await;
    match body {
        Ok(b) => json(b),
        Err(f) => f.into_response(),
    }
}

/// The window picker's choices.
fn choices() -> Vec<(String, String)> {
    [
        ("everything kept", ""),
        ("last day", "last=1d"),
        ("last 7 days", "last=7d"),
        ("last 30 days", "last=30d"),
    ]
    .into_iter()
    .map(|(a, b)| (a.to_owned(), b.to_owned()))
    .collect()
}

fn html(body: String) -> Response {
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], body).into_response()
}

async fn page(
    State(s): State<Arc<AppState>>,
    signed_in: Option<axum::Extension<SignedIn>>,
    Window(q): Window,
) -> Response {
    let a = match answer_for(&s, &q).await {
        Ok(a) => a,
        Err(f) => return f.into_response(),
    };
    let (status, problem) = s.status();
    let query = q.query();
    let choices = choices();
    let view = View {
        query: &query,
        window: &a.window,
        choices: &choices,
        status: &status,
        generation: a.generation,
        refresh_s: s.opts.refresh.as_secs().max(1),
        problem: problem.as_deref(),
        budgets: &a.analysis.budgets,
        logout: signed_in.is_some(),
    };
    html(dashboard::page(
        &a.analysis.report,
        a.analysis.advice.as_ref(),
        &view,
    ))
}

async fn device(
    State(s): State<Arc<AppState>>,
    signed_in: Option<axum::Extension<SignedIn>>,
    Window(q): Window,
) -> Response {
    let a = match answer_for(&s, &q).await {
        Ok(a) => a,
        Err(f) => return f.into_response(),
    };
    let id = q.id.clone().unwrap_or_default();
    let r = &a.analysis.report;
    // By id, else by the display name every page shows (`host/gpu3`) when one device has it.
    let named: Vec<&gpuwise_core::report::DeviceRow> =
        r.devices.iter().filter(|d| d.name == id).collect();
    let row = match (r.devices.iter().find(|d| d.id == id), named.as_slice()) {
        (Some(row), _) => row,
        (None, [row]) => *row,
        (None, []) => {
            return Failure(
                StatusCode::NOT_FOUND,
                "no device with that id or name in this window".into(),
            )
            .into_response();
        }
        (None, many) => {
            return Failure(
                StatusCode::NOT_FOUND,
                format!(
                    "{} devices are named that in this window: ask by id ({})",
                    many.len(),
                    many.iter()
                        .map(|d| d.id.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            )
            .into_response();
        }
    };
    let profile = a
        .analysis
        .profiles
        .iter()
        .find(|p| p.key.to_string() == row.id);
    let (status, problem) = s.status();
    let query = q.query();
    let view = View {
        query: &query,
        window: &a.window,
        choices: &[],
        status: &status,
        generation: a.generation,
        refresh_s: s.opts.refresh.as_secs().max(1),
        problem: problem.as_deref(),
        budgets: &[],
        logout: signed_in.is_some(),
    };
    html(dashboard::device_page(row, profile, &view))
}

#[cfg(test)]
mod tests {
    use super::{Duration, Options, host_allowed, same_bytes};

    #[test]
    fn only_loopback_the_bound_address_and_allowed_names_are_answered() {
        let opts = |listen: &str, allowed: &[&str]| Options {
            listen: listen.parse().expect("address"),
            token: None,
            allowed_hosts: allowed.iter().map(|a| (*a).to_owned()).collect(),
            refresh: Duration::from_secs(1),
            request_timeout: Duration::from_secs(1),
            store_windows_per_minute: 16,
            tls: None,
        };
        let local = opts("127.0.0.1:8080", &[]);
        for ok in [
            "127.0.0.1:8080",
            "localhost:8080",
            "LOCALHOST",
            "[::1]:8080",
            "127.0.0.1",
        ] {
            assert!(host_allowed(ok, &local), "{ok}");
        }
        for bad in [
            "evil.example:8080",
            "evil.example",
            "127.0.0.1.evil.example",
            "",
            "[::2]:80",
        ] {
            assert!(!host_allowed(bad, &local), "{bad}");
        }
        let lan = opts("10.1.2.3:8080", &["gpu-dash.internal:8080"]);
        assert!(host_allowed("10.1.2.3:8080", &lan));
        assert!(host_allowed("GPU-DASH.internal", &lan));
        assert!(!host_allowed("other.internal", &lan));
        // 0.0.0.0 is no name a client uses.
        let any = opts("0.0.0.0:8080", &[]);
        assert!(!host_allowed("0.0.0.0:8080", &any));
        assert!(host_allowed("localhost:8080", &any));
    }

    #[test]
    fn tokens_compare_whole() {
        assert!(same_bytes(b"secret", b"secret"));
        assert!(!same_bytes(b"secret", b"secreT"));
        assert!(!same_bytes(b"secret", b"secret2"));
        assert!(!same_bytes(b"", b"x"));
    }
}
