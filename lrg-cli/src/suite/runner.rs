//! Running one case: its own model, its own MCP processes, its own session.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use lrg_chat::testing::{Failure, SessionTest};

use super::scenario::Case;
use crate::cli::ModelArgs;

/// How cases are run.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// `--record`: run the real model and rewrite each case's recording.
    pub record: bool,
    /// `--model`: the model to record with instead of the case's.
    pub model: Option<String>,
    /// `--repeat`.
    pub repeat: u32,
    /// `--min-pass`.
    pub min_pass: u32,
}

/// How one run of a case went.
#[derive(Debug, Clone)]
pub enum Attempt {
    /// Every expectation held.
    Passed,
    /// Some did not.
    Failed(Vec<Failure>),
    /// The case could not run (its model or tools did not start).
    Error(String),
}

/// How a case went over all its runs.
#[derive(Debug, Clone)]
pub struct CaseResult {
    /// The case.
    pub case: Case,
    /// Runs made.
    pub runs: u32,
    /// Runs that passed.
    pub passed_runs: u32,
    /// Whether enough runs passed.
    pub passed: bool,
    /// The last run that did not pass, to explain.
    pub problem: Option<Attempt>,
    /// Time taken by all runs.
    pub duration: Duration,
    /// With `--record`: where the recording was written.
    pub recorded: Option<PathBuf>,
}

/// Run `case` as often as `options` say.
pub async fn run_case(case: Case, options: &RunOptions) -> CaseResult {
    let started = Instant::now();
    let mut passed_runs = 0;
    let mut problem = None;
    for _ in 0..options.repeat {
        match run_once(&case, options).await {
            Attempt::Passed => passed_runs += 1,
            other => problem = Some(other),
        }
    }
    let recorded = options.record.then(|| case.recording.clone()).flatten();
    CaseResult {
        passed: passed_runs >= options.min_pass,
        runs: options.repeat,
        passed_runs,
        problem,
        duration: started.elapsed(),
        recorded,
        case,
    }
}

/// The model a run uses, and the recording it writes.
fn model_for(case: &Case, options: &RunOptions) -> Result<(String, Option<PathBuf>), String> {
    if options.record {
        let Some(recording) = &case.recording else {
            // Nothing to record into: the case runs as it always does.
            return case
                .model
                .clone()
                .map(|m| (m, None))
                .ok_or_else(|| "the case names no model".to_string());
        };
        let model = options.model.clone().or_else(|| case.model.clone());
        return match model {
            Some(m) if !m.starts_with("replay:") => Ok((m, Some(recording.clone()))),
            _ => Err(format!(
                "--record needs a real model to record {} with: set the case's `model`, or pass --model",
                recording.display()
            )),
        };
    }
    match (&case.recording, &case.model) {
        (Some(recording), _) => {
            if !recording.exists() {
                return Err(format!(
                    "the recording {} does not exist: make it with `lrg test --record`",
                    recording.display()
                ));
            }
            Ok((format!("replay:{}", recording.display()), None))
        }
        (None, Some(model)) => Ok((model.clone(), None)),
        (None, None) => Err("the case names no model".to_string()),
    }
}

async fn run_once(case: &Case, options: &RunOptions) -> Attempt {
    let (model, record) = match model_for(case, options) {
        Ok(m) => m,
        Err(e) => return Attempt::Error(e),
    };
    let args = ModelArgs {
        model: Some(model),
        base_url: case.base_url.clone(),
        local_only: false,
        tool_format: None,
        // The flag's variable: a case's llama: model sees with the projector it names.
        mmproj: std::env::var_os("LRG_MMPROJ").map(std::path::PathBuf::from),
        model_timeout: None,
        engine: Default::default(),
    };
    // The CLI's own model and tool setup, as `lrg run` uses it.
    let resolved = match crate::resolve::resolve(&args, record.as_deref()).await {
        Ok(r) => r,
        Err(e) => return Attempt::Error(e.to_string()),
    };
    let host = match crate::tools::host(&case.tools, true).await {
        Ok(h) => h,
        Err(e) => return Attempt::Error(e.to_string()),
    };
    let transcript = run_session(case, resolved.model, resolved.replay, host.clone()).await;
    host.shutdown().await;
    let failures = case.expect.check(&transcript);
    if failures.is_empty() {
        Attempt::Passed
    } else {
        Attempt::Failed(failures)
    }
}

/// Run `case`'s messages on `model` with `tools`, as `lrg test` does (held
/// to `replay`'s checks when it is a replay); `lrg sessions export` runs
/// the case it writes this way, offline, on the kept tool results.
pub(crate) async fn run_session(
    case: &Case,
    model: std::sync::Arc<dyn lrg_providers::ChatModel>,
    replay: Option<std::sync::Arc<lrg_providers::record::ReplayModel>>,
    tools: std::sync::Arc<dyn lrg_chat::tools::Tools>,
) -> lrg_chat::testing::Transcript {
    let mut test = SessionTest::with_model(model)
        .tools(tools)
        .permissions(case.settings.clone())
        .answers(case.approvals.iter().cloned())
        .generation(case.generation.clone())
        .timeout(case.timeout);
    if let Some(replay) = replay {
        test = test.watch_replay(replay);
    }
    if let Some(system) = &case.system {
        test = test.system_prompt(system.clone());
    }
    if let Some(steps) = case.max_steps {
        test = test.max_steps(steps);
    }
    // A typed case: its last message is the one whose answer is the case's
    // output; the ones before it set the conversation up.
    let last = case.messages.len().saturating_sub(1);
    for (i, message) in case.messages.iter().enumerate() {
        test = match &case.output {
            Some(schema) if i == last => test.typed_message(message.clone(), schema.clone()),
            _ => test.message(message.clone()),
        };
    }
    test.run().await
}
