//! What each request of a connection goes through before and after the
//! router: the 403 throttle, the request-target cap, the body-read timeout,
//! and the in-flight bookkeeping of the connection's entry.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Instant;

use axum::body::{Body, Bytes, HttpBody};
use axum::extract::ConnectInfo;
use axum::http::{HeaderValue, Request, Response, StatusCode, header};
use axum::response::IntoResponse as _;
use futures::future::BoxFuture;
use http_body::{Frame, SizeHint};
use hyper::body::Incoming;
use tower::ServiceExt as _;

use super::Shared;
use super::registry::ConnEntry;
use crate::http::{ApiError, ApiErrorKind};

/// The hyper service of one connection.
#[derive(Clone)]
pub(super) struct ConnService {
    pub(super) shared: Arc<Shared>,
    pub(super) entry: Arc<ConnEntry>,
    pub(super) peer: SocketAddr,
}

impl hyper::service::Service<Request<Incoming>> for ConnService {
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Response<Body>, Infallible>>;

    fn call(&self, request: Request<Incoming>) -> Self::Future {
        let body_pending = !request.body().is_end_stream();
        self.entry.request_started(body_pending);
        let guard = InFlight(self.entry.clone());
        let shared = self.shared.clone();
        let peer = self.peer;
        let entry = self.entry.clone();
        Box::pin(async move {
            let response = answer(&shared, &entry, peer, request, body_pending).await;
            entry.body_done();
            Ok(response.map(|body| {
                Body::new(Tracked {
                    inner: body,
                    _guard: guard,
                })
            }))
        })
    }
}

async fn answer(
    shared: &Shared,
    entry: &Arc<ConnEntry>,
    peer: SocketAddr,
    request: Request<Incoming>,
    body_pending: bool,
) -> Response<Body> {
    let options = &shared.options;
    let ip = peer.ip();
    // Only a request that carries a token can be a guess at one, and only
    // such requests are counted and held back. A browser never attaches
    // `Authorization` to another site's request without a CORS preflight,
    // which lrg never grants: so a page of any site, on the same machine
    // (one address for all on loopback), can neither spend an address's
    // 403s nor lock its person out of the page or their chats.
    let guess = request.headers().contains_key(header::AUTHORIZATION);
    if guess && let Some(wait) = shared.throttle.blocked(ip, Instant::now()) {
        let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
        let mut response = ApiError::too_many(format!(
            "too many refused requests from this address: try again in {secs} s"
        ))
        .into_response();
        let h = response.headers_mut();
        h.insert(header::RETRY_AFTER, HeaderValue::from(secs.max(1)));
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        h.insert(
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        );
        return response;
    }
    let target = request
        .uri()
        .path_and_query()
        .map_or(0, |p| p.as_str().len());
    if target > options.max_uri_bytes {
        return close(json_response(
            StatusCode::URI_TOO_LONG,
            ApiErrorKind::TooLarge,
            &format!(
                "the request target is {target} bytes: at most {} are read",
                options.max_uri_bytes
            ),
        ));
    }

    let mut request = request.map(|body| {
        Body::new(Watched {
            inner: body,
            entry: entry.clone(),
        })
    });
    request.extensions_mut().insert(ConnectInfo(peer));
    let routed = shared.router.clone().oneshot(request);
    let response = if body_pending {
        tokio::pin!(routed);
        let deadline = tokio::time::sleep(options.body_read_timeout);
        tokio::pin!(deadline);
        let mut body_late = false;
        loop {
            tokio::select! {
                r = &mut routed => break r,
                () = &mut deadline, if !body_late => {
                    if entry.body_is_pending() {
                        // Dropping the handler drops the body; the connection
                        // closes after this answer.
                        return close(json_response(
                            StatusCode::REQUEST_TIMEOUT,
                            ApiErrorKind::Timeout,
                            &format!(
                                "the request body did not arrive within {} s",
                                options.body_read_timeout.as_secs_f64()
                            ),
                        ));
                    }
                    body_late = true;
                }
            }
        }
    } else {
        routed.await
    };
    let response = match response {
        Ok(r) => r,
        Err(never) => match never {},
    };
    if guess && response.status() == StatusCode::FORBIDDEN {
        shared.throttle.charge(ip, Instant::now());
    }
    response
}

/// A response that ends the connection after it.
fn close(mut response: Response<Body>) -> Response<Body> {
    response
        .headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}

/// An error answer in the API's form, for a status [`ApiError`] has no
/// constructor for.
fn json_response(status: StatusCode, kind: ApiErrorKind, message: &str) -> Response<Body> {
    let mut response = Response::new(Body::from(super::error_json(kind, message)));
    *response.status_mut() = status;
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    response
}

/// Marks the request in flight until dropped (with the response body).
struct InFlight(Arc<ConnEntry>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.request_done();
    }
}

/// The request body, telling the entry when it has all arrived.
struct Watched {
    inner: Incoming,
    entry: Arc<ConnEntry>,
}

impl HttpBody for Watched {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let frame = ready!(Pin::new(&mut self.inner).poll_frame(cx));
        if !matches!(frame, Some(Ok(_))) || self.inner.is_end_stream() {
            self.entry.body_done();
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// A response body holding its request in flight until it ends.
struct Tracked {
    inner: Body,
    _guard: InFlight,
}

impl HttpBody for Tracked {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
