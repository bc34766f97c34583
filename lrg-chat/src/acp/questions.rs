//! `lrg acp`: the questions a chat's tool servers ask (MCP elicitation,
//! `question` events) go to the editor as ACP `elicitation/create` where
//! it declared it answers that mode, and are declined with
//! [`CANNOT_ASK`] where it did not.

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    CreateElicitationRequest, ElicitationAction, ElicitationCapabilities, ElicitationFormMode,
    ElicitationId, ElicitationMode, ElicitationSchema, ElicitationSessionScope, ElicitationUrlMode,
    SessionId,
};

use crate::ChatSession;
use crate::events::Event;
use crate::session::{QuestionAnswer, QuestionMode};

/// What a server is told when the editor cannot answer its question.
pub const CANNOT_ASK: &str = "this editor cannot answer questions";

/// Put the `question` event `event` to the editor, or decline it, in a task
/// of its own so the turn's updates keep flowing.
pub(super) fn forward(
    cx: &ConnectionTo<Client>,
    chat: &ChatSession,
    id: &SessionId,
    caps: Option<&ElicitationCapabilities>,
    event: &Event,
) {
    let Event::Question {
        question_id,
        tool_call_id,
        message,
        mode,
        requested_schema,
        url,
        ..
    } = event
    else {
        return;
    };
    let question_id = *question_id;
    let request = request(
        id,
        caps,
        *mode,
        tool_call_id,
        requested_schema,
        url,
        question_id,
    )
    .map(|m| CreateElicitationRequest::new(m, message.clone()));
    let Some(request) = request else {
        let _ = chat.answer_question(question_id, QuestionAnswer::decline_with(CANNOT_ASK));
        return;
    };
    let (conn, asked) = (cx.clone(), chat.clone());
    let task = async move {
        let answer = match conn.send_request(request).block_task().await {
            Ok(response) => answer(response.action),
            // The editor failed to answer: the tool's operation is off.
            Err(e) => QuestionAnswer::Cancel {
                reason: Some(format!("the editor did not answer: {e}")),
            },
        };
        // A form the editor filled in wrongly is refused by the check: the
        // server is told why instead of waiting for a second answer that
        // ACP has no way to ask for.
        if let Err(e) = asked.answer_question(question_id, answer) {
            let _ = asked.answer_question(
                question_id,
                QuestionAnswer::decline_with(format!("the editor's answer was refused: {e}")),
            );
        }
        Ok(())
    };
    if cx.spawn(task).is_err() {
        let _ = chat.answer_question(question_id, QuestionAnswer::cancel());
    }
}

/// The elicitation the editor is asked, when it declared it takes that mode
/// (and a form's schema is one ACP can carry).
fn request(
    id: &SessionId,
    caps: Option<&ElicitationCapabilities>,
    mode: QuestionMode,
    tool_call_id: &Option<String>,
    requested_schema: &Option<serde_json::Value>,
    url: &Option<String>,
    question_id: u64,
) -> Option<ElicitationMode> {
    let caps = caps?;
    let scope =
        ElicitationSessionScope::new(id.clone()).tool_call_id(tool_call_id.clone().map(Into::into));
    match mode {
        QuestionMode::Form => {
            caps.form.as_ref()?;
            let schema: ElicitationSchema =
                serde_json::from_value(requested_schema.clone()?).ok()?;
            Some(ElicitationMode::Form(ElicitationFormMode::new(
                scope, schema,
            )))
        }
        QuestionMode::Url => {
            caps.url.as_ref()?;
            Some(ElicitationMode::Url(ElicitationUrlMode::new(
                scope,
                ElicitationId::new(format!("q{question_id}")),
                url.clone()?,
            )))
        }
    }
}

/// The chat's answer for what the editor chose.
fn answer(action: ElicitationAction) -> QuestionAnswer {
    match action {
        ElicitationAction::Accept(accepted) => QuestionAnswer::Accept {
            content: accepted
                .content
                .and_then(|content| serde_json::to_value(content).ok()),
        },
        ElicitationAction::Decline => QuestionAnswer::decline(),
        ElicitationAction::Cancel => QuestionAnswer::cancel(),
        _ => QuestionAnswer::decline_with("the editor answered with an action lrg does not know"),
    }
}

#[cfg(test)]
mod tests {
    use agent_client_protocol::v1::schema::{
        ElicitationAcceptAction, ElicitationContentValue, ElicitationFormCapabilities,
        ElicitationScope,
    };
    use serde_json::json;

    use super::*;

    fn form() -> Option<serde_json::Value> {
        Some(json!({
            "type": "object",
            "properties": {"name": {"type": "string", "title": "Name"}},
            "required": ["name"]
        }))
    }

    #[test]
    fn an_editor_that_declared_no_elicitation_is_not_asked() {
        let id = SessionId::new("s");
        assert!(request(&id, None, QuestionMode::Form, &None, &form(), &None, 1).is_none());
        // Form only: a URL question is declined too.
        let caps = ElicitationCapabilities::new().form(ElicitationFormCapabilities::new());
        let url = Some("https://example.com/login".to_string());
        assert!(request(&id, Some(&caps), QuestionMode::Url, &None, &None, &url, 1).is_none());
    }

    #[test]
    fn a_form_goes_to_an_editor_that_answers_forms_with_its_call() {
        let id = SessionId::new("s");
        let caps = ElicitationCapabilities::new().form(ElicitationFormCapabilities::new());
        let call = Some("c1".to_string());
        let Some(ElicitationMode::Form(asked)) = request(
            &id,
            Some(&caps),
            QuestionMode::Form,
            &call,
            &form(),
            &None,
            1,
        ) else {
            panic!("not asked as a form");
        };
        assert!(asked.requested_schema.properties.contains_key("name"));
        let ElicitationScope::Session(scope) = asked.scope else {
            panic!("not scoped to the session");
        };
        assert_eq!(
            scope.tool_call_id.map(|c| c.0.to_string()),
            Some("c1".into())
        );
    }

    #[test]
    fn the_editors_choice_is_the_answer() {
        let content: std::collections::BTreeMap<String, ElicitationContentValue> = [(
            "name".to_string(),
            ElicitationContentValue::String("Ada".into()),
        )]
        .into_iter()
        .collect();
        let accepted = ElicitationAction::Accept(ElicitationAcceptAction::new().content(content));
        assert_eq!(
            answer(accepted),
            QuestionAnswer::accept(json!({"name": "Ada"}))
        );
        assert_eq!(
            answer(ElicitationAction::Decline),
            QuestionAnswer::decline()
        );
        assert_eq!(answer(ElicitationAction::Cancel), QuestionAnswer::cancel());
    }
}
