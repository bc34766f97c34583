//! `POST …/questions/{question_id}`: answer a tool server's question (a
//! `question` event) with `{"action": "accept", "content": {...}}`,
//! `{"action": "decline"}` or `{"action": "cancel"}`. 400 names the field
//! an accepted form's content gets wrong (the question stays open); 404 for
//! a question that is not open (unknown, answered, cancelled).

use std::sync::Arc;

use axum::Json;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::AppState;
use super::error::ApiError;
use super::guard::AuthedChat;
use crate::session::{QuestionAnswer, QuestionError};

/// `POST …/questions/{question_id}`.
pub(crate) async fn post_answer(
    State(state): State<Arc<AppState>>,
    AuthedChat(chat): AuthedChat,
    Path((_, question_id)): Path<(String, String)>,
    body: Body,
) -> Result<Response, ApiError> {
    let Ok(id) = question_id.parse::<u64>() else {
        return Err(ApiError::not_found(format!(
            "no question {question_id} is open"
        )));
    };
    let answer: QuestionAnswer =
        super::body::read_json(state.config.limits.body_bytes, body).await?;
    match chat.session.answer_question(id, answer) {
        Ok(()) => Ok(Json(json!({"accepted": true})).into_response()),
        Err(e @ QuestionError::NoSuchQuestion(_)) => Err(ApiError::not_found(e.to_string())),
        Err(QuestionError::Invalid { field, message }) => {
            Err(ApiError::bad_request(&format!("content.{field}"), message))
        }
    }
}
