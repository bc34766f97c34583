//! The streamable-HTTP MCP client with a `traceparent` header: rmcp sends
//! each request from its own worker task, outside the call's span, so the
//! header is read from the request itself (`params._meta.traceparent`, set
//! by the MCP client inside the call's span, see `tools::mcp`).

use std::collections::HashMap;
use std::sync::Arc;

use axum::http::{HeaderName, HeaderValue};
use futures::stream::BoxStream;
use rmcp::model::{ClientJsonRpcMessage, ClientRequest, GetMeta as _, JsonRpcMessage};
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};

/// rmcp's reqwest client, adding the `traceparent` of each request.
#[derive(Clone)]
pub(crate) struct TracedHttp(reqwest::Client);

/// Redirects followed by one request, as rmcp's own client allows.
const MAX_REDIRECTS: usize = 10;

impl TracedHttp {
    /// A client made like rmcp's default one: no idle pool (rmcp: it avoids
    /// delayed-ACK stalls on reuse) and only same-origin 307/308 redirects,
    /// which keep the body and never replay headers to another host.
    pub(crate) fn new() -> Result<Self, String> {
        let policy = reqwest::redirect::Policy::custom(|attempt| {
            let keeps_body = matches!(
                attempt.status(),
                reqwest::StatusCode::TEMPORARY_REDIRECT | reqwest::StatusCode::PERMANENT_REDIRECT
            );
            let same_origin = attempt
                .previous()
                .first()
                .is_some_and(|first| first.origin() == attempt.url().origin());
            if !keeps_body || !same_origin {
                attempt.stop()
            } else if attempt.previous().len() > MAX_REDIRECTS {
                attempt.error(format!("more than {MAX_REDIRECTS} redirects"))
            } else {
                attempt.follow()
            }
        });
        reqwest::Client::builder()
            .pool_max_idle_per_host(0)
            .redirect(policy)
            .build()
            .map(Self)
            .map_err(|e| format!("cannot build the HTTP client: {e}"))
    }
}

/// `headers` with the `traceparent` that `message` carries in its `_meta`.
fn with_traceparent(
    message: &ClientJsonRpcMessage,
    mut headers: HashMap<HeaderName, HeaderValue>,
) -> HashMap<HeaderName, HeaderValue> {
    let JsonRpcMessage::Request(request) = message else {
        return headers;
    };
    let ClientRequest::CallToolRequest(call) = &request.request else {
        return headers;
    };
    // rmcp keeps a request's `_meta` in its extensions once it sent it on;
    // the params' own is what the caller set.
    let value = request
        .request
        .get_meta()
        .get_traceparent()
        .or_else(|| call.params.meta.as_ref().and_then(|m| m.get_traceparent()));
    if let Some(value) = value.and_then(|v| HeaderValue::from_str(v).ok()) {
        headers.insert(
            HeaderName::from_static(lrg_providers::traceparent::TRACEPARENT),
            value,
        );
    }
    headers
}

type Post = Result<StreamableHttpPostResponse, StreamableHttpError<reqwest::Error>>;
type Stream = Result<
    BoxStream<'static, Result<sse_stream::Sse, SseError>>,
    StreamableHttpError<reqwest::Error>,
>;

impl StreamableHttpClient for TracedHttp {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Post {
        let headers = with_traceparent(&message, custom_headers);
        self.0
            .post_message(uri, message, session_id, auth_header, headers)
            .await
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Post {
        let headers = with_traceparent(&message, custom_headers);
        self.0
            .post_message_with_max_sse_event_size(
                uri,
                message,
                session_id,
                auth_header,
                headers,
                max_sse_event_size,
            )
            .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Post {
        let headers = with_traceparent(&message, custom_headers);
        self.0
            .post_message_with_response_limits(
                uri,
                message,
                session_id,
                auth_header,
                headers,
                limits,
            )
            .await
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), StreamableHttpError<reqwest::Error>> {
        self.0
            .delete_session(uri, session_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Stream {
        self.0
            .get_stream(uri, session_id, last_event_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Stream {
        self.0
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::{CallToolRequest, CallToolRequestParams, JsonRpcRequest, RequestId};

    #[test]
    fn a_call_with_a_traceparent_in_its_meta_gets_the_header() {
        let value = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
        let mut params = CallToolRequestParams::new("echo");
        params
            .meta
            .get_or_insert_with(Default::default)
            .set_traceparent(value);
        let message = JsonRpcMessage::Request(JsonRpcRequest::new(
            RequestId::Number(1),
            ClientRequest::CallToolRequest(CallToolRequest::new(params)),
        ));
        let headers = with_traceparent(&message, HashMap::new());
        let name = HeaderName::from_static("traceparent");
        assert_eq!(headers.get(&name).unwrap(), value, "{headers:?}");
        let plain = JsonRpcMessage::Request(JsonRpcRequest::new(
            RequestId::Number(2),
            ClientRequest::CallToolRequest(CallToolRequest::new(CallToolRequestParams::new(
                "echo",
            ))),
        ));
        assert!(with_traceparent(&plain, HashMap::new()).is_empty());
    }
}
