//! Play one scripted turn and print it: the smallest use of the ChatModel trait.
use futures::StreamExt as _;
use lrg_providers::{ChatModel, Message, ScriptedModel, TurnEvent, TurnRequest};
use tokio_util::sync::CancellationToken;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let model = ScriptedModel::from_json(
        "demo",
        r#"[{"reasoning": "The user greets me.", "text": "Hello! How can I help?"}]"#,
    )?;
    let request = TurnRequest::new(vec![Message::user("hi")]);
    let mut stream = model.turn(request, CancellationToken::new());
    while let Some(event) = stream.next().await {
        match event? {
            TurnEvent::ReasoningDelta { text } => eprint!("{text}"),
            TurnEvent::TextDelta { text } => print!("{text}"),
            TurnEvent::End { stop } => println!("\n[end: {stop:?}]"),
            _ => {}
        }
    }
    Ok(())
}
