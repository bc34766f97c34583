//! [`ChatSession::next_prompt`]: what the next model turn would send, for
//! showing (`GET /v1/chat/sessions/{id}/prompt`, "Show the system prompt").

use lrg_providers::ProviderError;
use lrg_providers::text_tools::ToolMode;
use lrg_providers::typed::OutputSchema;

use super::ChatSession;
use crate::permissions::is_offered;
use crate::prompt::{BuiltPrompt, PromptPreview, PromptSection, SectionName, added_elsewhere};

impl ChatSession {
    /// The system prompt and tools the next model turn would send, as the
    /// loop computes them: the model resolved now, the tools the
    /// permissions do not block (with the sub-agent tools when they are
    /// on), and the prompt built for both. A session built with
    /// [`super::ChatSessionBuilder::prompt`] gives it section by section
    /// (with what its provider adds, as far as the builder knows the tool
    /// mode); any other prompt is one `base` section. With `output`, as for
    /// a typed message ([`ChatSession::send_output`]): the schema in words
    /// follows where the model is asked that way.
    pub async fn next_prompt(
        &self,
        output: Option<&OutputSchema>,
    ) -> Result<PromptPreview, ProviderError> {
        let shared = &self.shared;
        let model = shared.models.resolve().await?;
        let info = model.info();
        drop(model);
        // With sub-agents on, their tools are among these.
        let mut specs = shared
            .tools
            .list_shared()
            .await
            .map(|s| s.to_vec())
            .unwrap_or_default();
        let settings = shared.permissions.settings();
        specs.retain(|s| is_offered(&settings, &s.name));
        let prompt = match &shared.prompt {
            Some(builder) => builder.preview(&info, &specs, output),
            None => {
                let mut sections: Vec<_> = (shared.system_prompt)(&info, &specs)
                    .into_iter()
                    .map(|text| PromptSection::new(SectionName::Base, text, None))
                    .collect();
                // What a provider adds is not known here: only the typed part.
                sections.extend(added_elsewhere(&info, &specs, output, ToolMode::Native));
                BuiltPrompt { sections }
            }
        };
        Ok(PromptPreview::new(prompt, &specs, Some(info.id())))
    }
}
