//! The connection layer under the router: [`serve`], whose docs state
//! what it bounds; the parts are the connection registry (who is closed to
//! make room), the per-request service (throttle, target cap, body
//! timeout), the socket shim (hyper's own errors as JSON), and the 403
//! throttle.

mod io;
mod registry;
mod service;
mod throttle;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

use self::registry::{ConnEntry, Eviction, Registry};
use self::throttle::Throttle;
use crate::http::{ApiErrorKind, ChatServer};

/// How [`serve`] treats connections. Every limit is per server.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ServeOptions {
    /// Time for a request's head (request line and headers) to arrive,
    /// counted from when the connection is ready for one (accepted, or the
    /// previous response sent); the connection is closed after it. Default
    /// 10 s.
    pub header_read_timeout: Duration,
    /// Time for a request's body to arrive, from its head (408, then the
    /// connection closes). Default 60 s: a message's images are up to 8 MiB.
    pub body_read_timeout: Duration,
    /// How long a kept-alive connection may sit with no request in flight
    /// and nothing received before it is closed. Default 5 s. (The
    /// header-read timeout runs then too, so the shorter of the two applies.)
    pub idle_timeout: Duration,
    /// How long a response may wait for its client to read it (the socket
    /// is full) before the connection is closed. Default 30 s.
    pub write_timeout: Duration,
    /// Connections open at once. Default [`default_max_connections`].
    pub max_connections: usize,
    /// Largest request head in bytes, request line included (431). Default
    /// 16 KiB.
    pub max_header_bytes: usize,
    /// Longest request target (path and query) in bytes (414). Default 8 KiB.
    pub max_uri_bytes: usize,
    /// 403s an address may get in a burst before its requests are answered
    /// 429; 0 turns the throttle off. Default 20.
    pub forbidden_burst: u32,
    /// How often an address gets back one 403 of its burst. Default 1 s.
    pub forbidden_refill: Duration,
    /// How long a stopping server waits for open requests to finish before
    /// it drops their connections. Default 10 s.
    pub shutdown_grace: Duration,
}

impl Default for ServeOptions {
    fn default() -> Self {
        Self {
            header_read_timeout: Duration::from_secs(10),
            body_read_timeout: Duration::from_secs(60),
            idle_timeout: Duration::from_secs(5),
            write_timeout: Duration::from_secs(30),
            max_connections: default_max_connections(),
            max_header_bytes: 16 << 10,
            max_uri_bytes: 8 << 10,
            forbidden_burst: 20,
            forbidden_refill: Duration::from_secs(1),
            shutdown_grace: Duration::from_secs(10),
        }
    }
}

impl ServeOptions {
    /// See [`Self::header_read_timeout`].
    pub fn header_read_timeout(mut self, timeout: Duration) -> Self {
        self.header_read_timeout = timeout;
        self
    }

    /// See [`Self::body_read_timeout`].
    pub fn body_read_timeout(mut self, timeout: Duration) -> Self {
        self.body_read_timeout = timeout;
        self
    }

    /// See [`Self::idle_timeout`].
    pub fn idle_timeout(mut self, timeout: Duration) -> Self {
        self.idle_timeout = timeout;
        self
    }

    /// See [`Self::write_timeout`].
    pub fn write_timeout(mut self, timeout: Duration) -> Self {
        self.write_timeout = timeout;
        self
    }

    /// See [`Self::max_connections`].
    pub fn max_connections(mut self, max: usize) -> Self {
        self.max_connections = max;
        self
    }

    /// See [`Self::max_header_bytes`].
    pub fn max_header_bytes(mut self, max: usize) -> Self {
        self.max_header_bytes = max;
        self
    }

    /// See [`Self::max_uri_bytes`].
    pub fn max_uri_bytes(mut self, max: usize) -> Self {
        self.max_uri_bytes = max;
        self
    }

    /// See [`Self::forbidden_burst`] and [`Self::forbidden_refill`].
    pub fn forbidden_throttle(mut self, burst: u32, refill: Duration) -> Self {
        self.forbidden_burst = burst;
        self.forbidden_refill = refill;
        self
    }

    /// See [`Self::shutdown_grace`].
    pub fn shutdown_grace(mut self, grace: Duration) -> Self {
        self.shutdown_grace = grace;
        self
    }

    /// The first option that cannot work, named.
    fn check(&self) -> std::io::Result<()> {
        let zero = [
            ("header_read_timeout", self.header_read_timeout.is_zero()),
            ("body_read_timeout", self.body_read_timeout.is_zero()),
            ("idle_timeout", self.idle_timeout.is_zero()),
            ("write_timeout", self.write_timeout.is_zero()),
            ("max_connections", self.max_connections == 0),
            ("max_header_bytes", self.max_header_bytes == 0),
            ("max_uri_bytes", self.max_uri_bytes == 0),
            (
                "forbidden_refill",
                self.forbidden_burst > 0 && self.forbidden_refill.is_zero(),
            ),
        ];
        match zero.into_iter().find(|(_, bad)| *bad) {
            Some((name, _)) => Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("ServeOptions::{name} must be above zero"),
            )),
            None => Ok(()),
        }
    }
}

/// The default connection cap: the open-files limit (`RLIMIT_NOFILE`, soft)
/// less a reserve for files, tool servers and their pipes of a quarter of
/// it, at least 64 descriptors: `clamp(limit - max(limit / 4, 64), 16,
/// 8192)`. 256 descriptors give 192 connections, 1,024 give 768. Where
/// the limit cannot be read (not unix), 1,024.
pub fn default_max_connections() -> usize {
    max_connections_for(open_files_limit())
}

fn max_connections_for(limit: Option<u64>) -> usize {
    match limit {
        Some(n) => {
            let reserve = (n / 4).max(64);
            usize::try_from(n.saturating_sub(reserve).clamp(16, 8192)).unwrap_or(8192)
        }
        None => 1024,
    }
}

#[cfg(unix)]
#[allow(unsafe_code, clippy::useless_conversion)]
fn open_files_limit() -> Option<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one `rlimit` through a pointer to this live,
    // aligned local and keeps no reference to it.
    let rc = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) };
    if rc != 0 {
        return None;
    }
    if limit.rlim_cur == libc::RLIM_INFINITY {
        return Some(u64::MAX);
    }
    u64::try_from(limit.rlim_cur).ok()
}

#[cfg(not(unix))]
fn open_files_limit() -> Option<u64> {
    None
}

/// The API's error body, `{"error": {"kind", "message"}}`.
fn error_json(kind: ApiErrorKind, message: &str) -> String {
    serde_json::json!({"error": {"kind": kind, "message": message}}).to_string()
}

/// What every connection of one server shares.
pub(crate) struct Shared {
    options: ServeOptions,
    router: Router,
    registry: Registry,
    throttle: Throttle,
    http1: http1::Builder,
}

/// Serve `router` on `listener` with `options` until `shutdown` resolves;
/// then stop accepting, let open requests finish for up to
/// [`ServeOptions::shutdown_grace`], and return. An embedding app passes
/// any axum router and gets the same protection as `lrg serve`.
///
/// `axum::serve` keeps every connection as long as its client likes. This
/// layer, on hyper's HTTP/1.1 server, bounds what a client can hold without
/// a token:
///
/// - **Headers** must arrive within [`ServeOptions::header_read_timeout`]
///   (10 s; the connection is closed), and be at most
///   [`ServeOptions::max_header_bytes`] (16 KiB, request line included) and
///   100 headers (431). A request target over [`ServeOptions::max_uri_bytes`]
///   (8 KiB) is a 414.
/// - **A body** must have arrived within [`ServeOptions::body_read_timeout`]
///   (60 s) of its head: 408, and the connection is closed.
/// - **An idle connection** (kept alive, no request in flight, nothing sent)
///   is closed after [`ServeOptions::idle_timeout`] (5 s).
/// - **A client that stops reading** its answer (the socket stays full) is
///   closed after [`ServeOptions::write_timeout`] (30 s).
/// - **Connections** are capped at [`ServeOptions::max_connections`]
///   (default [`default_max_connections`], from the open-files limit). When
///   the server is full, the connection that has waited longest without a
///   request (slow or idle) is closed to make room, then one whose body is
///   still trickling in or whose client stopped reading. A connection with
///   a complete request in flight that its client reads, every open event
///   stream included, is never closed for it; when all are such, new
///   connections wait in the listen queue (backpressure). Running out of
///   file descriptors in `accept` closes the longest-idle connection and
///   retries shortly, instead of spinning or failing.
/// - **Refused token guesses** are throttled per address: each 403 to a
///   request carrying `Authorization` costs a token from a bucket of
///   [`ServeOptions::forbidden_burst`] (20) refilled one per
///   [`ServeOptions::forbidden_refill`] (1 s); with none left, the
///   address's requests carrying `Authorization` get 429 with `Retry-After`
///   before they reach the router. Requests without one (the page, a
///   browser's cross-site requests, which cannot carry it without a CORS
///   preflight lrg never grants) are neither counted nor held back, so no
///   web page can lock a person out of their own chats. The 403 itself is
///   unchanged, byte for byte. The address is
///   the TCP peer's: behind a reverse proxy every client shares the proxy's,
///   so set `forbidden_burst` to 0 there and throttle in the proxy.
///
/// Every error answer, hyper's own protocol errors (400, 414, 431) included,
/// has the API's body `{"error": {"kind", "message"}}`.
///
/// Only HTTP/1.1 is served: browsers speak HTTP/2 only over TLS, which this
/// server does not terminate, and cleartext HTTP/2 would bypass the
/// per-connection accounting above. Handlers can read the peer's address as
/// `axum::extract::ConnectInfo<std::net::SocketAddr>`.
///
/// Fails only on options that cannot work (a zero timeout or cap); errors
/// of single connections are logged at debug level and end only them.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    options: ServeOptions,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    options.check()?;
    let mut http1 = http1::Builder::new();
    http1
        .timer(TokioTimer::new())
        .header_read_timeout(options.header_read_timeout)
        .max_header_size(options.max_header_bytes)
        .keep_alive(true);
    let shared = Arc::new(Shared {
        throttle: Throttle::new(options.forbidden_burst, options.forbidden_refill),
        options,
        router,
        registry: Registry::new(),
        http1,
    });
    let draining = CancellationToken::new();
    accept_loop(&shared, &listener, shutdown, &draining).await;
    drop(listener);
    draining.cancel();
    let drained = tokio::time::timeout(shared.options.shutdown_grace, async {
        while shared.registry.len() > 0 {
            shared.registry.freed().await;
        }
    })
    .await;
    if drained.is_err() {
        tracing::info!(
            open = shared.registry.len(),
            "closing the connections still open at shutdown"
        );
        shared.registry.close_all();
        let _ = tokio::time::timeout(Duration::from_secs(1), async {
            while shared.registry.len() > 0 {
                shared.registry.freed().await;
            }
        })
        .await;
    }
    Ok(())
}

impl ChatServer {
    /// Serve this server's [routes](Self::router) on `listener` (see
    /// [`serve`]) until `shutdown` resolves, then end every chat (streams
    /// close, running tools finish; see [`Self::shutdown`]) and let the
    /// connections finish.
    pub async fn serve(
        &self,
        listener: TcpListener,
        options: ServeOptions,
        shutdown: impl Future<Output = ()>,
    ) -> std::io::Result<()> {
        let server = self.clone();
        serve(listener, self.router(), options, async move {
            shutdown.await;
            server.shutdown().await;
        })
        .await
    }
}

/// Accepts until `shutdown`, making room under the cap first.
async fn accept_loop(
    shared: &Arc<Shared>,
    listener: &TcpListener,
    shutdown: impl Future<Output = ()>,
    draining: &CancellationToken,
) {
    tokio::pin!(shutdown);
    let mut warned: Option<Instant> = None;
    let mut warn = |message: &str, error: Option<&std::io::Error>| {
        // At most one line per 10 s: a flood must not flood the log.
        if warned.is_none_or(|at| at.elapsed() > Duration::from_secs(10)) {
            warned = Some(Instant::now());
            match error {
                Some(e) => tracing::warn!(error = %e, "{message}"),
                None => tracing::warn!("{message}"),
            }
        }
    };
    loop {
        if shared.registry.len() >= shared.options.max_connections {
            let eviction = shared.registry.evict_one();
            let wait = if eviction == Eviction::NoneEvictable {
                warn(
                    "every connection has a request in flight: new connections wait",
                    None,
                );
                Duration::from_millis(100)
            } else {
                Duration::from_millis(20)
            };
            tokio::select! {
                () = &mut shutdown => return,
                () = shared.registry.freed() => {}
                () = tokio::time::sleep(wait) => {}
            }
            continue;
        }
        tokio::select! {
            () = &mut shutdown => return,
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => spawn_connection(shared, stream, peer, draining),
                Err(e) if is_connection_error(&e) => {}
                Err(e) => {
                    // EMFILE/ENFILE above all: the socket stays readable,
                    // so retrying at once would spin. Free a descriptor.
                    warn("cannot accept a connection; closing the longest-idle one", Some(&e));
                    shared.registry.evict_one();
                    tokio::select! {
                        () = &mut shutdown => return,
                        () = tokio::time::sleep(Duration::from_millis(50)) => {}
                    }
                }
            }
        }
    }
}

/// Errors of one connection that went away before it was accepted.
fn is_connection_error(e: &std::io::Error) -> bool {
    use std::io::ErrorKind as K;
    matches!(
        e.kind(),
        K::ConnectionRefused | K::ConnectionAborted | K::ConnectionReset | K::Interrupted
    )
}

/// Removes the entry however its task ends.
struct Registered {
    shared: Arc<Shared>,
    entry: Arc<ConnEntry>,
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.shared.registry.remove(&self.entry);
    }
}

fn spawn_connection(
    shared: &Arc<Shared>,
    stream: TcpStream,
    peer: SocketAddr,
    draining: &CancellationToken,
) {
    let registered = Registered {
        shared: shared.clone(),
        entry: shared.registry.insert(),
    };
    let draining = draining.clone();
    tokio::spawn(async move {
        run_connection(&registered, stream, peer, draining).await;
        drop(registered);
    });
}

async fn run_connection(
    registered: &Registered,
    stream: TcpStream,
    peer: SocketAddr,
    draining: CancellationToken,
) {
    let (shared, entry) = (&registered.shared, &registered.entry);
    let _ = stream.set_nodelay(true);
    let options = &shared.options;
    let socket = io::Socket::new(
        stream,
        entry.clone(),
        io::ErrorLimits {
            header_bytes: options.max_header_bytes,
        },
    );
    let service = service::ConnService {
        shared: shared.clone(),
        entry: entry.clone(),
        peer,
    };
    let connection = shared.http1.serve_connection(TokioIo::new(socket), service);
    tokio::pin!(connection);
    let mut graceful = false;
    let expired = || {
        let now = Instant::now();
        entry
            .idle_deadline(options.idle_timeout)
            .is_some_and(|at| at <= now)
            || entry
                .stall_deadline(options.write_timeout)
                .is_some_and(|at| at <= now)
    };
    loop {
        // Look again at the nearest deadline, and at least once per the
        // shorter timeout (a deadline may start after this look): cheaper
        // than a wake-up per state change, so a timeout may be overrun by
        // up to the shorter one.
        let wake = [
            entry.idle_deadline(options.idle_timeout),
            entry.stall_deadline(options.write_timeout),
            Some(Instant::now() + options.idle_timeout.min(options.write_timeout)),
        ]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or_else(Instant::now);
        tokio::select! {
            ended = connection.as_mut() => {
                if let Err(e) = ended {
                    tracing::debug!(%peer, error = %e, "connection ended");
                }
                return;
            }
            () = entry.closed() => return,
            () = draining.cancelled(), if !graceful => {
                connection.as_mut().graceful_shutdown();
                graceful = true;
            }
            () = tokio::time::sleep_until(tokio::time::Instant::from_std(wake)) => {
                if expired() {
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
