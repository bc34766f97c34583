//! Where a conversation goes: the "local only" lock enforced in the loop,
//! and `sends_to` events at the first turn that leaves the machine and on
//! every change of destination.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::session_support;

use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use lrg_chat::events::{ErrorKind, Event};
use lrg_chat::{ChatSession, ModelSource, TurnOutcome};
use lrg_providers::{
    ChatModel, ModelInfo, ModelLocation, ProviderError, ScriptedModel, TurnRequest, TurnStream,
};
use session_support::{finish, reply};
use tokio_util::sync::CancellationToken;

/// A scripted model that says it runs elsewhere.
struct At {
    inner: ScriptedModel,
    info: ModelInfo,
}

impl ChatModel for At {
    fn info(&self) -> ModelInfo {
        self.info.clone()
    }

    fn turn(&self, request: TurnRequest, cancel: CancellationToken) -> TurnStream {
        self.inner.turn(request, cancel)
    }
}

fn cloud(inner: &ScriptedModel) -> Arc<dyn ChatModel> {
    Arc::new(At {
        inner: inner.clone(),
        info: ModelInfo::new("openai", "gpt-4.1", ModelLocation::Cloud)
            .sends_to(Some("api.openai.com".into())),
    })
}

/// The model the app has chosen now; the session asks at every turn.
struct Chosen(Mutex<Arc<dyn ChatModel>>);

impl ModelSource for Chosen {
    fn resolve(&self) -> BoxFuture<'_, Result<Arc<dyn ChatModel>, ProviderError>> {
        let model = self.0.lock().unwrap().clone();
        Box::pin(async move { Ok(model) })
    }
}

fn destinations(session: &ChatSession) -> Vec<(String, Option<String>)> {
    session
        .events()
        .entries()
        .iter()
        .filter_map(|e| match &e.event {
            Event::SendsTo { provider, host } => Some((provider.clone(), host.clone())),
            _ => None,
        })
        .collect()
}

fn error_kinds(session: &ChatSession) -> Vec<ErrorKind> {
    session
        .events()
        .entries()
        .iter()
        .filter_map(|e| match &e.event {
            Event::Error { kind, .. } => Some(*kind),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_local_only_session_refuses_a_cloud_model_in_the_loop() {
    let scripted = ScriptedModel::new(vec![reply("never sent")]);
    let session = ChatSession::builder(Arc::new(Chosen(Mutex::new(cloud(&scripted)))))
        .local_only(true)
        .build();
    assert!(session.local_only());
    let outcome = finish(session.send("hi").unwrap()).await;
    let TurnOutcome::Failed { error } = outcome else {
        panic!("{outcome:?}")
    };
    assert!(error.to_string().contains("local only"), "{error}");
    assert_eq!(error_kinds(&session), [ErrorKind::LocalOnly]);
    assert!(scripted.requests().is_empty(), "nothing reached the cloud");
    assert!(destinations(&session).is_empty());
    let json = serde_json::to_value(&*session.events().entries()[2]).unwrap();
    assert_eq!(json["kind"], "local_only", "{json}");
}

#[tokio::test]
async fn sends_to_at_the_start_and_on_every_change_and_the_lock_mid_chat() {
    let scripted = ScriptedModel::new(vec![reply("1"), reply("2"), reply("3"), reply("4")]);
    let local: Arc<dyn ChatModel> = Arc::new(scripted.clone());
    let chosen = Arc::new(Chosen(Mutex::new(local.clone())));
    let session = ChatSession::builder(chosen.clone()).build();

    // On this machine: nothing to say.
    finish(session.send("a").unwrap()).await;
    assert!(destinations(&session).is_empty());

    // To a cloud: said once, before the turn, not again for the same host.
    *chosen.0.lock().unwrap() = cloud(&scripted);
    finish(session.send("b").unwrap()).await;
    finish(session.retry_last().unwrap()).await;
    assert_eq!(
        destinations(&session),
        [("openai".to_string(), Some("api.openai.com".to_string()))]
    );

    // Locked mid-chat: the cloud model cannot take the next message.
    session.set_local_only(true);
    let outcome = finish(session.send("c").unwrap()).await;
    assert!(matches!(outcome, TurnOutcome::Failed { .. }), "{outcome:?}");
    assert_eq!(error_kinds(&session), [ErrorKind::LocalOnly]);

    // Back on this machine: said too.
    *chosen.0.lock().unwrap() = local;
    let outcome = finish(session.send("d").unwrap()).await;
    assert!(
        matches!(outcome, TurnOutcome::Completed { .. }),
        "{outcome:?}"
    );
    assert_eq!(destinations(&session).len(), 2);
    assert_eq!(destinations(&session)[1].1, None);
}

#[tokio::test]
async fn switching_models_is_a_new_chat_and_refused_mid_message() {
    use lrg_chat::session::SwitchableModel;
    let scripted = ScriptedModel::new(vec![reply("1")]);
    let source = Arc::new(SwitchableModel::new(Arc::new(scripted.clone())));
    let session = ChatSession::builder(source.clone()).build();
    let cloud_info = cloud(&scripted).info();
    // An empty chat going to a local model: nothing to confirm.
    let check = session.switch_check(&scripted.info()).unwrap();
    assert!(!check.needs_confirmation());
    assert!(session.switch_check(&cloud_info).unwrap().to_cloud);

    // Mid-message: refused.
    let slow = ScriptedModel::new(vec![reply("never")]);
    let (gate, gated) = tokio::sync::oneshot::channel::<()>();
    let gated = Arc::new(Mutex::new(Some(gated)));
    struct Held(
        ScriptedModel,
        Arc<Mutex<Option<tokio::sync::oneshot::Receiver<()>>>>,
    );
    impl ModelSource for Held {
        fn resolve(&self) -> BoxFuture<'_, Result<Arc<dyn ChatModel>, ProviderError>> {
            let model: Arc<dyn ChatModel> = Arc::new(self.0.clone());
            let rx = self.1.lock().unwrap().take();
            Box::pin(async move {
                if let Some(rx) = rx {
                    let _ = rx.await;
                }
                Ok(model)
            })
        }
    }
    let busy = ChatSession::builder(Arc::new(Held(slow, gated))).build();
    let handle = busy.send("hi").unwrap();
    assert_eq!(
        busy.switch_check(&cloud_info).unwrap_err(),
        lrg_chat::SessionError::Busy
    );
    assert_eq!(
        busy.switch_model(&source, cloud(&scripted)).unwrap_err(),
        lrg_chat::SessionError::Busy
    );
    drop(gate);
    busy.stop();
    let _ = finish(handle).await;

    // After a message: confirmation, then a new chat on the new model.
    finish(session.send("a").unwrap()).await;
    assert!(session.switch_check(&cloud_info).unwrap().drops_history);
    session.switch_model(&source, cloud(&scripted)).unwrap();
    assert!(session.history().is_empty());
    assert_eq!(source.current().info().id(), "openai:gpt-4.1");
}
