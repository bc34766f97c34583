//! Images through llama.cpp's multimodal library (mtmd): loading the
//! projector, placing media markers, and turning each image into the chunks
//! the model evaluates.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hasher};
use std::path::Path;

use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::mtmd::{
    MtmdBitmap, MtmdContext, MtmdContextParams, MtmdInputChunks, MtmdInputText, mtmd_default_marker,
};
use lrg_providers::local_chat::IMAGE_SLOT;
use lrg_providers::{Image, ProviderError};

/// The model's eyes: the projector's context and the images of the last turn,
/// already decoded and split into chunks, by the hash of their bytes.
pub(crate) struct Vision {
    ctx: MtmdContext,
    /// Images of the prompts in flight and of what the slots hold; a
    /// conversation sends the same ones again each turn, so each is decoded
    /// once.
    images: HashMap<u64, MtmdInputChunks>,
}

/// What a prompt's image is in the KV cache.
pub(crate) struct ImageChunk {
    pub hash: u64,
    pub tokens: u32,
    pub positions: u32,
}

/// The marker mtmd reads as an image's place in the text.
pub(crate) fn marker() -> &'static str {
    mtmd_default_marker()
}

impl Vision {
    /// Loads the projector at `path` for `model`.
    ///
    /// # Errors
    /// `Config` naming the file when llama.cpp cannot load it as a projector
    /// for this model, or when it has no vision encoder.
    pub fn load(
        path: &Path,
        model: &LlamaModel,
        model_path: &Path,
        use_gpu: bool,
        n_threads: Option<i32>,
    ) -> Result<Self, ProviderError> {
        let shown = path.display();
        let defaults = MtmdContextParams::default();
        let params = MtmdContextParams {
            use_gpu,
            print_timings: false,
            n_threads: n_threads.unwrap_or(defaults.n_threads),
            ..defaults
        };
        let text = path.to_str().ok_or_else(|| ProviderError::Config {
            message: format!("the projector path (--mmproj) {shown} is not valid UTF-8"),
        })?;
        let ctx = MtmdContext::init_from_file(text, model, &params).map_err(|e| {
            ProviderError::Config {
                message: format!(
                    "llama.cpp could not load the projector (--mmproj) {shown} for the model {}: \
                     it is not a projector GGUF, or one made for another model \
                     (a projector must come from the same release as its model) ({e})",
                    model_path.display()
                ),
            }
        })?;
        if !ctx.support_vision() {
            return Err(ProviderError::Config {
                message: format!(
                    "the projector (--mmproj) {shown} has no vision encoder (an audio-only projector?)"
                ),
            });
        }
        Ok(Self {
            ctx,
            images: HashMap::new(),
        })
    }

    /// Decodes and chunks `images` (those of one prompt, in order), reusing
    /// the ones already decoded; [`Vision::retain`] forgets the others.
    ///
    /// # Errors
    /// `BadRequest` naming the image when llama.cpp cannot decode it or
    /// prepare it for this model.
    pub fn prepare(&mut self, images: &[&Image]) -> Result<Vec<ImageChunk>, ProviderError> {
        let mut out = Vec::with_capacity(images.len());
        for (i, image) in images.iter().enumerate() {
            let hash = hash_bytes(&image.data);
            let chunks = match self.images.remove(&hash) {
                Some(c) => c,
                None => self.chunk(image).map_err(|why| ProviderError::BadRequest {
                    message: format!(
                        "image {} of the conversation ({}, {} bytes) {why}",
                        i + 1,
                        image.mime,
                        image.data.len()
                    ),
                })?,
            };
            out.push(ImageChunk {
                hash,
                tokens: u32::try_from(chunks.total_tokens()).unwrap_or(u32::MAX),
                positions: u32::try_from(chunks.total_positions()).unwrap_or(u32::MAX),
            });
            self.images.insert(hash, chunks);
        }
        Ok(out)
    }

    /// Forgets the decoded images whose hashes `keep` does not name. Several
    /// conversations share the engine, so the worker keeps those its slots
    /// hold or its running turns will evaluate.
    pub fn retain(&mut self, keep: &std::collections::HashSet<u64>) {
        self.images.retain(|hash, _| keep.contains(hash));
    }

    /// One image alone, as chunks: the model's begin tokens, the image, its
    /// end tokens. Evaluated as a unit after the text before it.
    fn chunk(&self, image: &Image) -> Result<MtmdInputChunks, String> {
        let bitmap = MtmdBitmap::from_buffer(&self.ctx, &image.data, false).map_err(|_| {
            "could not be decoded by llama.cpp (it reads PNG, JPEG, BMP, GIF, TGA, PSD and PNM)"
                .to_string()
        })?;
        let text = MtmdInputText {
            text: marker().to_string(),
            add_special: false,
            parse_special: true,
        };
        self.ctx
            .tokenize(text, &[&bitmap])
            .map_err(|e| format!("could not be prepared for this model: {e}"))
    }

    /// Evaluates the image with this hash at position `n_past` of sequence
    /// `seq` (encoding it with the projector first).
    ///
    /// # Errors
    /// `Other` when the image is unknown (not prepared for this prompt) or
    /// llama.cpp fails to encode or evaluate it.
    pub fn eval(
        &mut self,
        hash: u64,
        llama: &mut LlamaContext<'_>,
        n_past: u32,
        seq: i32,
        n_batch: usize,
        logits_last: bool,
    ) -> Result<(), ProviderError> {
        let chunks = self.images.get(&hash).ok_or_else(|| ProviderError::Other {
            message: "an image of this prompt was not prepared".into(),
        })?;
        let n_past = i32::try_from(n_past).unwrap_or(i32::MAX);
        let n_batch = i32::try_from(n_batch).unwrap_or(i32::MAX);
        chunks
            .eval_chunks(&mut self.ctx, llama, n_past, seq, n_batch, logits_last)
            .map(|_| ())
            .map_err(|e| ProviderError::Other {
                message: format!("llama.cpp failed to evaluate an image: {e}"),
            })
    }
}

/// A stable hash of an image's bytes: two images are the same image in the KV
/// cache when these are equal.
pub(crate) fn hash_bytes(data: &[u8]) -> u64 {
    // Fixed keys: equal bytes hash equal for the life of the process, which is
    // as long as a KV cache lives.
    let mut h = DefaultHasher::new();
    h.write(data);
    h.finish()
}

/// `content` with mtmd's marker at each image slot, for `n_images` images: a
/// marker already in the text is defused first (it would be read as an
/// image), missing slots are added at the end, surplus ones dropped.
pub(crate) fn place_markers(content: &str, n_images: usize) -> String {
    let marker = marker();
    let mut text = content.replace(marker, &defused(marker));
    let mut placed = 0;
    let mut out = String::with_capacity(text.len() + n_images * marker.len());
    for c in text.drain(..) {
        if c == IMAGE_SLOT {
            if placed < n_images {
                out.push_str(marker);
                placed += 1;
            }
        } else {
            out.push(c);
        }
    }
    for _ in placed..n_images {
        out.push('\n');
        out.push_str(marker);
    }
    out
}

/// Text without slots, for a model that takes no images.
pub(crate) fn drop_slots(content: &str) -> std::borrow::Cow<'_, str> {
    if content.contains(IMAGE_SLOT) {
        content.replace(IMAGE_SLOT, "").into()
    } else {
        content.into()
    }
}

/// The marker with a space after its first character, so mtmd does not read it.
fn defused(marker: &str) -> String {
    let mut chars = marker.chars();
    let first: String = chars.next().into_iter().collect();
    format!("{first} {}", chars.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_go_where_the_slots_are() {
        let m = marker();
        let content = format!("look:\n{IMAGE_SLOT}\nand\n{IMAGE_SLOT}");
        assert_eq!(place_markers(&content, 2), format!("look:\n{m}\nand\n{m}"));
    }

    #[test]
    fn a_marker_written_in_text_is_not_read_as_an_image() {
        let m = marker();
        let content = format!("the text says {m}\n{IMAGE_SLOT}");
        let placed = place_markers(&content, 1);
        assert_eq!(placed.matches(m).count(), 1);
        assert!(placed.ends_with(&format!("\n{m}")));
    }

    #[test]
    fn missing_slots_are_added_at_the_end_and_surplus_ones_dropped() {
        let m = marker();
        assert_eq!(place_markers("hi", 1), format!("hi\n{m}"));
        assert_eq!(
            place_markers(&format!("a{IMAGE_SLOT}b{IMAGE_SLOT}"), 1),
            format!("a{m}b")
        );
        assert_eq!(drop_slots(&format!("a{IMAGE_SLOT}b")), "ab");
    }

    #[test]
    fn equal_bytes_hash_equal() {
        assert_eq!(hash_bytes(b"png"), hash_bytes(b"png"));
        assert_ne!(hash_bytes(b"png"), hash_bytes(b"jpg"));
    }
}
