//! A tiny random-weight vision projector (a LLaVA-style CLIP encoder with an
//! MLP projector) that llama.cpp's multimodal library loads, so the vision
//! path of the engine runs offline.

use std::path::Path;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::gguf::{GgufFile, Value};

/// Sizes of the tiny projector. Its output width must equal the text model's
/// embedding width (`TinyModelSpec::n_embd`), or llama.cpp refuses the pair.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TinyProjectorSpec {
    /// Seed of the random weights.
    pub seed: u64,
    /// The text model's embedding width (what the projector outputs).
    pub n_embd_text: u32,
    /// Width of the vision encoder.
    pub n_embd: u32,
    /// Attention heads of the encoder.
    pub n_head: u32,
    /// Feed-forward width of the encoder.
    pub n_ff: u32,
    /// Encoder layers.
    pub n_layer: u32,
    /// Side of the square image the encoder reads, in pixels.
    pub image_size: u32,
    /// Side of a patch, in pixels: an image is `(image_size / patch_size)²` tokens.
    pub patch_size: u32,
}

impl Default for TinyProjectorSpec {
    /// For the default tiny model: 64 wide out, 4 tokens per image.
    fn default() -> Self {
        Self {
            seed: 7,
            n_embd_text: 64,
            n_embd: 32,
            n_head: 2,
            n_ff: 64,
            n_layer: 2,
            image_size: 28,
            patch_size: 14,
        }
    }
}

impl TinyProjectorSpec {
    /// The default spec for a text model `n_embd_text` wide.
    pub fn for_text_width(n_embd_text: u32) -> Self {
        Self {
            n_embd_text,
            ..Self::default()
        }
    }

    /// Tokens one image becomes.
    pub fn tokens_per_image(&self) -> u32 {
        let side = self.image_size / self.patch_size.max(1);
        side * side
    }
}

/// Writes the tiny projector to `path` (`clip` architecture, projector type
/// `mlp`, F32 random weights from `spec.seed`).
///
/// # Errors
/// When the file cannot be written.
pub fn write_tiny_projector(path: &Path, spec: &TinyProjectorSpec) -> std::io::Result<()> {
    let mut rng = StdRng::seed_from_u64(spec.seed);
    let mut f = GgufFile::default();
    f.kv("general.architecture", Value::Str("clip".into()));
    f.kv("general.name", Value::Str("lrg-tiny-mmproj".into()));
    f.kv("general.alignment", Value::U32(32));
    f.kv("clip.has_vision_encoder", Value::Bool(true));
    f.kv("clip.projector_type", Value::Str("mlp".into()));
    f.kv("clip.use_gelu", Value::Bool(true));
    f.kv("clip.vision.embedding_length", Value::U32(spec.n_embd));
    f.kv("clip.vision.attention.head_count", Value::U32(spec.n_head));
    f.kv("clip.vision.feed_forward_length", Value::U32(spec.n_ff));
    f.kv("clip.vision.block_count", Value::U32(spec.n_layer));
    f.kv("clip.vision.projection_dim", Value::U32(spec.n_embd_text));
    f.kv("clip.vision.attention.layer_norm_epsilon", Value::F32(1e-5));
    f.kv("clip.vision.image_size", Value::U32(spec.image_size));
    f.kv("clip.vision.patch_size", Value::U32(spec.patch_size));
    f.kv("clip.vision.image_mean", Value::F32Array(vec![0.5; 3]));
    f.kv("clip.vision.image_std", Value::F32Array(vec![0.5; 3]));

    let embd = u64::from(spec.n_embd);
    let ff = u64::from(spec.n_ff);
    let patch = u64::from(spec.patch_size);
    let out = u64::from(spec.n_embd_text);
    let n_patches = u64::from(spec.tokens_per_image());
    let mut random = |shape: &[u64], scale: f32| -> Vec<f32> {
        let n: u64 = shape.iter().product();
        (0..n).map(|_| rng.random_range(-scale..scale)).collect()
    };
    let ones = |n: u64| vec![1.0; n as usize];
    let zeros = |n: u64| vec![0.0; n as usize];

    // ggml shapes, fastest dimension first.
    let kernel = [patch, patch, 3, embd];
    f.tensor("v.patch_embd.weight", &kernel, random(&kernel, 0.1));
    f.tensor(
        "v.position_embd.weight",
        &[embd, n_patches],
        random(&[embd, n_patches], 0.1),
    );
    for i in 0..spec.n_layer {
        let p = format!("v.blk.{i}");
        for name in ["attn_q", "attn_k", "attn_v", "attn_out"] {
            f.tensor(
                format!("{p}.{name}.weight"),
                &[embd, embd],
                random(&[embd, embd], 0.2),
            );
            f.tensor(format!("{p}.{name}.bias"), &[embd], zeros(embd));
        }
        for name in ["ln1", "ln2"] {
            f.tensor(format!("{p}.{name}.weight"), &[embd], ones(embd));
            f.tensor(format!("{p}.{name}.bias"), &[embd], zeros(embd));
        }
        f.tensor(
            format!("{p}.ffn_up.weight"),
            &[embd, ff],
            random(&[embd, ff], 0.2),
        );
        f.tensor(format!("{p}.ffn_up.bias"), &[ff], zeros(ff));
        f.tensor(
            format!("{p}.ffn_down.weight"),
            &[ff, embd],
            random(&[ff, embd], 0.2),
        );
        f.tensor(format!("{p}.ffn_down.bias"), &[embd], zeros(embd));
    }
    f.tensor("mm.0.weight", &[embd, ff], random(&[embd, ff], 0.2));
    f.tensor("mm.0.bias", &[ff], zeros(ff));
    f.tensor("mm.2.weight", &[ff, out], random(&[ff, out], 0.2));
    f.tensor("mm.2.bias", &[out], zeros(out));

    let mut file = std::io::BufWriter::new(std::fs::File::create(path)?);
    f.write(&mut file)?;
    std::io::Write::flush(&mut file)
}
