//! What runs without asking: the tool's class × the mode × a rule per tool ×
//! the bulk limit, and the answers a person gives when asked.
//!
//! The decision ([`decide`]) is a pure function of the settings; the
//! [`Permissions`] store keeps the settings shared between sessions and saves
//! them as JSON.

mod store;
mod targets;

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::tools::ToolClass;

pub use store::{Permissions, PermissionsError, SaveStatus};
pub use targets::{LongestIdArray, TargetCounter};

/// The default bulk limit: a destructive call aimed at more items asks.
pub const DEFAULT_BULK_LIMIT: u32 = 200;

/// How much runs without asking, when no rule says otherwise.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Every call asks.
    AskAll,
    /// Read tools run; change and destructive ones ask.
    #[default]
    AutoRead,
    /// Read and change tools run; destructive ones ask.
    AutoSafe,
    /// Everything runs (the bulk limit still asks).
    AutoAll,
}

/// A person's rule for one tool, overriding the mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Rule {
    /// Runs without asking (the bulk limit still asks).
    Allow,
    /// Always asks.
    Ask,
    /// Never offered to the model.
    Block,
}

/// Everything a person set about permissions. Serialized as the settings
/// file:
///
/// ```json
/// {"mode": "auto_read", "rules": {"delete_file": "block"}, "bulk_limit": 200,
///  "cloud_consent": ["openai"]}
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PermissionSettings {
    /// The mode.
    pub mode: Mode,
    /// Rules by tool name.
    pub rules: BTreeMap<String, Rule>,
    /// A destructive call aimed at more targets than this asks even when
    /// allowed; 0 turns the limit off.
    pub bulk_limit: u32,
    /// Providers the person said "don't ask again" for: a chat sends its
    /// conversation to their clouds without asking first (see
    /// [`crate::ChatSession::cloud_consented`]). Left out of the file while
    /// empty, so an older lrg still reads it; absent in older files, which
    /// load with none.
    #[serde(skip_serializing_if = "BTreeSet::is_empty")]
    pub cloud_consent: BTreeSet<String>,
}

impl Default for PermissionSettings {
    fn default() -> Self {
        Self {
            mode: Mode::default(),
            rules: BTreeMap::new(),
            bulk_limit: DEFAULT_BULK_LIMIT,
            cloud_consent: BTreeSet::new(),
        }
    }
}

/// Why a call waits for the person.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ApprovalReason {
    /// The mode asks for this class of tool.
    Mode {
        /// The mode in force.
        mode: Mode,
    },
    /// A rule says ask for this tool.
    Rule,
    /// A destructive call aimed at more targets than the bulk limit.
    Bulk {
        /// How many targets the call is aimed at.
        targets: usize,
        /// The limit.
        limit: u32,
    },
    /// An external agent (which owns its tools) asks before a call.
    Agent,
    /// A `pre_tool_use` hook asks the person (see [`crate::hooks`]).
    Hook {
        /// The hook's reason, when it gave one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// A tool server asks the model (MCP sampling): a class of its own,
    /// which asks under `ask_all` and `auto_read` (see [`decide_sampling`]).
    Sampling {
        /// The mode in force.
        mode: Mode,
    },
}

/// The outcome of a permission check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Run it.
    Allow,
    /// Ask the person first.
    Ask(ApprovalReason),
    /// Do not run it (and do not offer it).
    Block,
}

/// A person's answer to an approval question.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Answer {
    /// Run this call.
    Once,
    /// Run it, and allow this tool for the rest of this chat.
    ThisChat,
    /// Run it, and write an allow rule for this tool.
    Always,
    /// Do not run it; the note (if any) is passed to the model.
    Deny {
        /// What the person wants instead.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        note: Option<String>,
    },
}

impl Answer {
    /// A denial without a note.
    pub fn deny() -> Self {
        Answer::Deny { note: None }
    }

    /// A denial with a note for the model.
    pub fn deny_with(note: impl Into<String>) -> Self {
        Answer::Deny {
            note: Some(note.into()),
        }
    }

    /// Which kind of answer it is.
    pub fn kind(&self) -> AnswerKind {
        match self {
            Answer::Once => AnswerKind::Once,
            Answer::ThisChat => AnswerKind::ThisChat,
            Answer::Always => AnswerKind::Always,
            Answer::Deny { .. } => AnswerKind::Deny,
        }
    }
}

/// The kinds of [`Answer`], without a denial's note: what an approval
/// question allows (`approval_needed`'s `answers`), and how a test answers
/// one ([`crate::testing::ApprovalAnswer`]). The names are those of
/// [`Answer`]'s `kind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum AnswerKind {
    /// Run this call.
    Once,
    /// Run it and allow the tool for the rest of the chat.
    ThisChat,
    /// Run it and allow the tool from now on (an allow rule; a test keeps it
    /// in memory and never writes settings).
    Always,
    /// Do not run it; a note is passed to the model.
    Deny,
}

impl AnswerKind {
    /// Its wire name (`once`, `this_chat`, `always`, `deny`).
    pub fn as_str(self) -> &'static str {
        match self {
            AnswerKind::Once => "once",
            AnswerKind::ThisChat => "this_chat",
            AnswerKind::Always => "always",
            AnswerKind::Deny => "deny",
        }
    }

    /// The answers a question allows: all four, or all but "always" (a
    /// bulk question asks even for an allowed tool, so a rule would not
    /// stop it asking).
    pub fn allowed(offer_always: bool) -> Vec<AnswerKind> {
        let mut kinds = vec![AnswerKind::Once, AnswerKind::ThisChat];
        if offer_always {
            kinds.push(AnswerKind::Always);
        }
        kinds.push(AnswerKind::Deny);
        kinds
    }
}

/// Decide whether a call runs, asks or is blocked.
///
/// `chat_allowed`: the person answered "for this chat" for this tool earlier,
/// which counts as an allow rule. `targets`: how many items the call is aimed
/// at, when that can be told ([`TargetCounter`]).
pub fn decide(
    settings: &PermissionSettings,
    tool: &str,
    class: ToolClass,
    chat_allowed: bool,
    targets: Option<usize>,
) -> Decision {
    decide_configured(settings, tool, class, chat_allowed, targets, None)
}

/// [`decide`], with what the tool's own configuration says
/// ([`crate::tools::ToolPolicy::rule`]: a server's `trust` or
/// `autoApprove`) under the person's rule for the tool: their rule comes
/// first, the configured one next, the mode last. A configured allow still
/// meets the bulk limit.
pub fn decide_configured(
    settings: &PermissionSettings,
    tool: &str,
    class: ToolClass,
    chat_allowed: bool,
    targets: Option<usize>,
    configured: Option<Rule>,
) -> Decision {
    let rule = settings.rules.get(tool).copied().or(configured);
    if rule == Some(Rule::Block) {
        return Decision::Block;
    }
    let allowed = if chat_allowed || rule == Some(Rule::Allow) {
        true
    } else if rule == Some(Rule::Ask) {
        return Decision::Ask(ApprovalReason::Rule);
    } else {
        matches!(
            (settings.mode, class),
            (Mode::AutoAll, _)
                | (Mode::AutoSafe, ToolClass::Read | ToolClass::Change)
                | (Mode::AutoRead, ToolClass::Read)
        )
    };
    if !allowed {
        return Decision::Ask(ApprovalReason::Mode {
            mode: settings.mode,
        });
    }
    match targets {
        Some(n)
            if class == ToolClass::Destructive
                && settings.bulk_limit > 0
                && n > settings.bulk_limit as usize =>
        {
            Decision::Ask(ApprovalReason::Bulk {
                targets: n,
                limit: settings.bulk_limit,
            })
        }
        _ => Decision::Allow,
    }
}

/// The name a server's sampling requests are approved under, for rules and
/// "for this chat" answers: `sampling/SERVER` (a `/` no tool name has, so
/// a rule for it never matches a tool).
pub fn sampling_rule_name(server: &str) -> String {
    format!("sampling/{server}")
}

/// Decide whether a tool server's `sampling/createMessage` (the server asks
/// the model) is answered without asking. Its class spends tokens and
/// sends the server's text to the model, so it asks under
/// [`Mode::AskAll`] and [`Mode::AutoRead`] and runs under
/// [`Mode::AutoSafe`] and [`Mode::AutoAll`]. A rule for
/// [`sampling_rule_name`] comes first (`block`: declined without asking);
/// `chat_allowed` counts as an allow rule.
pub fn decide_sampling(
    settings: &PermissionSettings,
    server: &str,
    chat_allowed: bool,
) -> Decision {
    match settings.rules.get(&sampling_rule_name(server)) {
        Some(Rule::Block) => return Decision::Block,
        Some(Rule::Allow) => return Decision::Allow,
        Some(Rule::Ask) if !chat_allowed => return Decision::Ask(ApprovalReason::Rule),
        _ if chat_allowed => return Decision::Allow,
        _ => {}
    }
    match settings.mode {
        Mode::AskAll | Mode::AutoRead => Decision::Ask(ApprovalReason::Sampling {
            mode: settings.mode,
        }),
        Mode::AutoSafe | Mode::AutoAll => Decision::Allow,
    }
}

/// Whether the tool is offered to the model at all.
pub(crate) fn is_offered(settings: &PermissionSettings, tool: &str) -> bool {
    settings.rules.get(tool) != Some(&Rule::Block)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(mode: Mode) -> PermissionSettings {
        PermissionSettings {
            mode,
            ..Default::default()
        }
    }

    #[test]
    fn modes_by_class() {
        use Decision::Allow;
        use ToolClass::*;
        let ask = |m| Decision::Ask(ApprovalReason::Mode { mode: m });
        let table = [
            (
                Mode::AskAll,
                [ask(Mode::AskAll), ask(Mode::AskAll), ask(Mode::AskAll)],
            ),
            (
                Mode::AutoRead,
                [Allow, ask(Mode::AutoRead), ask(Mode::AutoRead)],
            ),
            (Mode::AutoSafe, [Allow, Allow, ask(Mode::AutoSafe)]),
            (Mode::AutoAll, [Allow, Allow, Allow]),
        ];
        for (mode, expected) in table {
            for (class, want) in [Read, Change, Destructive].into_iter().zip(expected) {
                assert_eq!(
                    decide(&settings(mode), "t", class, false, None),
                    want,
                    "{mode:?} {class:?}"
                );
            }
        }
    }

    #[test]
    fn rules_override_the_mode() {
        let mut s = settings(Mode::AutoAll);
        s.rules.insert("t".into(), Rule::Ask);
        assert_eq!(
            decide(&s, "t", ToolClass::Read, false, None),
            Decision::Ask(ApprovalReason::Rule)
        );
        assert_eq!(
            decide(&s, "other", ToolClass::Read, false, None),
            Decision::Allow
        );
        s.rules.insert("t".into(), Rule::Block);
        assert_eq!(
            decide(&s, "t", ToolClass::Read, true, None),
            Decision::Block
        );
        assert!(!is_offered(&s, "t") && is_offered(&s, "other"));
        let mut s = settings(Mode::AskAll);
        s.rules.insert("t".into(), Rule::Allow);
        assert_eq!(
            decide(&s, "t", ToolClass::Destructive, false, None),
            Decision::Allow
        );
        assert_eq!(
            decide(&settings(Mode::AskAll), "t", ToolClass::Read, true, None),
            Decision::Allow
        );
    }

    #[test]
    fn a_configured_rule_comes_under_the_persons_and_meets_the_bulk_limit() {
        let mut s = settings(Mode::AutoRead);
        s.bulk_limit = 3;
        let allow = Some(Rule::Allow);
        assert_eq!(
            decide_configured(&s, "t", ToolClass::Destructive, false, None, allow),
            Decision::Allow
        );
        assert_eq!(
            decide_configured(&s, "t", ToolClass::Destructive, false, Some(4), allow),
            Decision::Ask(ApprovalReason::Bulk {
                targets: 4,
                limit: 3
            }),
            "a server's trust does not lift the bulk limit"
        );
        assert_eq!(
            decide_configured(&s, "t", ToolClass::Read, false, None, Some(Rule::Ask)),
            Decision::Ask(ApprovalReason::Rule)
        );
        s.rules.insert("t".into(), Rule::Block);
        assert_eq!(
            decide_configured(&s, "t", ToolClass::Read, false, None, allow),
            Decision::Block,
            "the person's rule comes first"
        );
    }

    #[test]
    fn bulk_limit_asks_for_allowed_destructive_calls_only() {
        let mut s = settings(Mode::AutoAll);
        s.bulk_limit = 3;
        let bulk = Decision::Ask(ApprovalReason::Bulk {
            targets: 4,
            limit: 3,
        });
        assert_eq!(
            decide(&s, "t", ToolClass::Destructive, false, Some(4)),
            bulk
        );
        assert_eq!(
            decide(&s, "t", ToolClass::Destructive, false, Some(3)),
            Decision::Allow
        );
        assert_eq!(
            decide(&s, "t", ToolClass::Change, false, Some(400)),
            Decision::Allow
        );
        assert_eq!(decide(&s, "t", ToolClass::Destructive, true, Some(4)), bulk);
        s.bulk_limit = 0;
        assert_eq!(
            decide(&s, "t", ToolClass::Destructive, false, Some(100_000)),
            Decision::Allow
        );
    }

    #[test]
    fn sampling_asks_under_ask_all_and_auto_read() {
        let ask = |mode| Decision::Ask(ApprovalReason::Sampling { mode });
        assert_eq!(
            decide_sampling(&settings(Mode::AskAll), "s", false),
            ask(Mode::AskAll)
        );
        assert_eq!(
            decide_sampling(&settings(Mode::AutoRead), "s", false),
            ask(Mode::AutoRead)
        );
        assert_eq!(
            decide_sampling(&settings(Mode::AutoSafe), "s", false),
            Decision::Allow
        );
        assert_eq!(
            decide_sampling(&settings(Mode::AutoAll), "s", false),
            Decision::Allow
        );
        assert_eq!(
            decide_sampling(&settings(Mode::AskAll), "s", true),
            Decision::Allow
        );
        let mut s = settings(Mode::AutoAll);
        s.rules.insert(sampling_rule_name("s"), Rule::Block);
        assert_eq!(decide_sampling(&s, "s", true), Decision::Block);
        assert_eq!(decide_sampling(&s, "other", false), Decision::Allow);
        s.rules.insert(sampling_rule_name("s"), Rule::Ask);
        assert_eq!(
            decide_sampling(&s, "s", false),
            Decision::Ask(ApprovalReason::Rule)
        );
        let json = serde_json::to_value(ApprovalReason::Sampling {
            mode: Mode::AutoRead,
        })
        .unwrap();
        assert_eq!(
            json,
            serde_json::json!({"kind": "sampling", "mode": "auto_read"})
        );
    }

    #[test]
    fn settings_json_shape() {
        let s: PermissionSettings = serde_json::from_str(r#"{"rules":{"x":"block"}}"#).unwrap();
        assert_eq!(s.mode, Mode::AutoRead);
        assert_eq!(s.bulk_limit, DEFAULT_BULK_LIMIT);
        assert_eq!(s.rules["x"], Rule::Block);
        let err = serde_json::from_str::<PermissionSettings>(r#"{"mode":"yolo"}"#).unwrap_err();
        assert!(err.to_string().contains("unknown variant `yolo`"), "{err}");
        assert!(
            s.cloud_consent.is_empty(),
            "a file from before consent was kept"
        );
        let json = serde_json::to_value(&s).unwrap();
        assert!(
            json.get("cloud_consent").is_none(),
            "left out while empty: {json}"
        );
        let mut s = s;
        s.cloud_consent.insert("openai".into());
        let text = serde_json::to_string(&s).unwrap();
        assert!(text.contains(r#""cloud_consent":["openai"]"#), "{text}");
        let back: PermissionSettings = serde_json::from_str(&text).unwrap();
        assert_eq!(back, s);
        let a: Answer = serde_json::from_str(r#"{"kind":"deny","note":"only three"}"#).unwrap();
        assert_eq!(a, Answer::deny_with("only three"));
    }
}
