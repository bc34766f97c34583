//! Errors as the API answers them: `{"error": {"kind", "message"}}` with the
//! matching status (and, for `other_model`, the chat's `stored_model`
//! beside `error`), and the one uniform 403.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

/// What kind of error a response reports (`error.kind`, stable snake_case).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ApiErrorKind {
    /// 400: the request is malformed; the message names the field.
    BadRequest,
    /// 403: wrong or missing token, foreign origin, or an ended chat. Always
    /// the same response, so none of these can be told from the others.
    Forbidden,
    /// 404: no such route, approval, image or tool result.
    NotFound,
    /// 405: the route exists but not with this method.
    MethodNotAllowed,
    /// 409: a message is being worked on.
    Busy,
    /// 409: the request cannot apply now (nothing to retry, ...).
    Conflict,
    /// 409: a switch that needs `confirm: true`. Not answered by this
    /// server's routes any more (a switch keeps the old chat, so nothing
    /// needs confirming); kept so clients that match on it still build.
    ConfirmNeeded,
    /// 409: the keys name a chat on another model (the body's
    /// `stored_model`); nothing was changed. Open it on that model, or send
    /// `carry_over: true` or `replace: true`.
    OtherModel,
    /// 413: the body or the message is over its limit; also 414 (the
    /// request target) and 431 (the request headers).
    TooLarge,
    /// 408: the request's body did not arrive in time.
    Timeout,
    /// 429: too many chats, or too many event streams on one chat.
    TooMany,
    /// 500: something failed inside the server (no details are given).
    Internal,
}

/// An error answer of the API.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ApiError {
    status: StatusCode,
    kind: ApiErrorKind,
    message: String,
    /// For [`ApiErrorKind::OtherModel`]: the model the chat is on.
    stored_model: Option<String>,
}

/// The body of every 403. Fixed, so a wrong token, a foreign origin and an
/// ended chat cannot be told apart.
const FORBIDDEN_BODY: &str = r#"{"error":{"kind":"forbidden","message":"forbidden: a missing or wrong token, a foreign origin, or a chat that has ended"}}"#;

impl ApiError {
    fn new(status: StatusCode, kind: ApiErrorKind, message: impl Into<String>) -> Self {
        Self {
            status,
            kind,
            message: message.into(),
            stored_model: None,
        }
    }

    /// 400 about one field of the request.
    pub fn bad_request(field: &str, problem: impl std::fmt::Display) -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            ApiErrorKind::BadRequest,
            format!("`{field}`: {problem}"),
        )
    }

    /// 400 about the request as a whole.
    pub(crate) fn bad_body(problem: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, ApiErrorKind::BadRequest, problem)
    }

    /// The uniform 403.
    pub fn forbidden() -> Self {
        Self::new(StatusCode::FORBIDDEN, ApiErrorKind::Forbidden, "forbidden")
    }

    /// 404.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, ApiErrorKind::NotFound, message)
    }

    /// 405.
    pub fn method_not_allowed() -> Self {
        Self::new(
            StatusCode::METHOD_NOT_ALLOWED,
            ApiErrorKind::MethodNotAllowed,
            "this route does not take that method",
        )
    }

    /// 409: busy with a message.
    pub fn busy() -> Self {
        Self::new(
            StatusCode::CONFLICT,
            ApiErrorKind::Busy,
            "the chat is busy with a message: stop it or wait for it to finish",
        )
    }

    /// 409: not possible now.
    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, ApiErrorKind::Conflict, message)
    }

    /// 409: the keys name a chat on `stored_model`, not the model asked
    /// for; the body carries `stored_model` beside the error.
    pub fn other_model(stored_model: impl Into<String>, message: impl Into<String>) -> Self {
        let mut e = Self::new(StatusCode::CONFLICT, ApiErrorKind::OtherModel, message);
        e.stored_model = Some(stored_model.into());
        e
    }

    /// 413.
    pub fn too_large(message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            ApiErrorKind::TooLarge,
            message,
        )
    }

    /// 429.
    pub fn too_many(message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::TOO_MANY_REQUESTS,
            ApiErrorKind::TooMany,
            message,
        )
    }

    /// 500 with a message that gives nothing of the server away.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            ApiErrorKind::Internal,
            message,
        )
    }

    /// The HTTP status.
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// The kind.
    pub fn kind(&self) -> ApiErrorKind {
        self.kind
    }
}

#[derive(Serialize)]
struct Body<'a> {
    error: Inner<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    stored_model: Option<&'a str>,
}

#[derive(Serialize)]
struct Inner<'a> {
    kind: ApiErrorKind,
    message: &'a str,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = if self.kind == ApiErrorKind::Forbidden {
            FORBIDDEN_BODY.to_string()
        } else {
            serde_json::to_string(&Body {
                error: Inner {
                    kind: self.kind,
                    message: &self.message,
                },
                stored_model: self.stored_model.as_deref(),
            })
            .unwrap_or_else(|_| FORBIDDEN_BODY.to_string())
        };
        let mut response = (self.status, body).into_response();
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        response
    }
}
