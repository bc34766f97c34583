//! Rendering a conversation into what the model reads: chat template,
//! tokens, and (with a projector) image chunks at their markers' places.

use llama_cpp_2::model::{LlamaChatMessage, LlamaModel};
use lrg_providers::local_chat::{EngineMessage, EngineRole};
use lrg_providers::{Image, ProviderError};

use super::Worker;
use crate::chunks::Chunks;
use crate::vision::{drop_slots, marker, place_markers};

impl<'m> Worker<'m> {
    /// The conversation as the model reads it: chat template applied, the
    /// assistant's generation prompt appended, tokenized with special tokens,
    /// each image (with a projector) a chunk at its marker's place.
    pub(super) fn prompt(&mut self, messages: &[EngineMessage]) -> Result<Chunks, ProviderError> {
        let (rendered, images) = self.render(messages)?;
        let model: &'m LlamaModel = self.model;
        let vocab = model.vocab();
        let ids = |text: &str, first: bool| -> Vec<i32> {
            vocab
                .tokenize(text.as_bytes(), first, true)
                .iter()
                .map(|t| t.0)
                .collect()
        };
        let mut chunks = Chunks::new();
        let Some(vision) = self.vision.as_mut().filter(|_| !images.is_empty()) else {
            chunks.push_tokens(&ids(&rendered, true));
            return Ok(chunks);
        };
        // Text between markers is tokenized piece by piece, as mtmd does.
        let pieces: Vec<&str> = rendered.split(marker()).collect();
        if pieces.len() != images.len() + 1 {
            return Err(ProviderError::Other {
                message: format!(
                    "the chat template kept {} of {} image markers",
                    pieces.len() - 1,
                    images.len()
                ),
            });
        }
        let prepared = vision.prepare(&images)?;
        for (i, piece) in pieces.iter().enumerate() {
            if i > 0 {
                let image = &prepared[i - 1];
                chunks.push_image(image.hash, image.tokens, image.positions);
            }
            chunks.push_tokens(&ids(piece, i == 0));
        }
        Ok(chunks)
    }

    /// The chat template applied to `messages`, and the images in the order
    /// of their markers.
    fn render<'a>(
        &self,
        messages: &'a [EngineMessage],
    ) -> Result<(String, Vec<&'a Image>), ProviderError> {
        let mut chat = Vec::with_capacity(messages.len());
        let mut images = Vec::new();
        for m in messages {
            let role = match m.role {
                EngineRole::System => "system",
                EngineRole::User => "user",
                EngineRole::Assistant => "assistant",
            };
            let content = match (&self.vision, m.images.is_empty()) {
                // Every message, so that a marker written in text is defused.
                (Some(_), _) => {
                    images.extend(&m.images);
                    place_markers(&m.content, m.images.len())
                }
                (None, true) => drop_slots(&m.content).into_owned(),
                (None, false) => {
                    return Err(ProviderError::Unsupported {
                        message: "this model was loaded without a projector (--mmproj), so it \
                                  cannot take images"
                            .into(),
                    });
                }
            };
            let msg = LlamaChatMessage::new(role.into(), content).map_err(|e| {
                ProviderError::BadRequest {
                    message: format!("a {role} message cannot be passed to llama.cpp: {e}"),
                }
            })?;
            chat.push(msg);
        }
        let rendered = self
            .model
            .apply_chat_template(&self.template, &chat, true)
            .map_err(|e| ProviderError::BadRequest {
                message: format!(
                    "the model's chat template could not render the conversation: {e}"
                ),
            })?;
        Ok((rendered, images))
    }
}
