//! Finding local model files: `.gguf` files and MLX model directories in the
//! model directories, plus paths named explicitly. Only headers and
//! `config.json` are read; no model is loaded.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::gguf::read_gguf_metadata;
use super::table::EngineFiles;

/// A model file (or MLX directory) found on this machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FoundModel {
    /// The path, as the model id takes it.
    pub path: PathBuf,
    /// Its own name (`general.name`), else the file name.
    pub name: String,
    /// Bytes on disk.
    pub size: u64,
    /// The architecture its metadata names.
    pub architecture: Option<String>,
    /// The trained context length, when the metadata says.
    pub context_length: Option<u32>,
}

/// The user's default model directory: `$LRG_MODELS_DIR`, else `lrg/models`
/// under the platform's data directory (`$XDG_DATA_HOME`, `~/.local/share`,
/// `~/Library/Application Support`, `%LOCALAPPDATA%`).
pub fn default_models_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("LRG_MODELS_DIR").filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(dir));
    }
    data_dir().map(|d| d.join("lrg").join("models"))
}

fn data_dir() -> Option<PathBuf> {
    let env = |name: &str| {
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    if cfg!(windows) {
        return env("LOCALAPPDATA");
    }
    if cfg!(target_os = "macos") {
        return env("HOME").map(|h| h.join("Library").join("Application Support"));
    }
    env("XDG_DATA_HOME").or_else(|| env("HOME").map(|h| h.join(".local").join("share")))
}

/// The file name of `path`, for messages that must not show full paths.
pub(crate) fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "(unnamed)".into())
}

/// Every model of `kind` in `dirs` (one level deep) and `paths`, sorted by
/// path, each once. Unreadable entries are skipped with a debug log.
pub(crate) fn find(kind: EngineFiles, dirs: &[PathBuf], paths: &[PathBuf]) -> Vec<FoundModel> {
    let mut candidates: Vec<PathBuf> = paths.to_vec();
    for dir in dirs {
        match std::fs::read_dir(dir) {
            Ok(entries) => candidates.extend(entries.filter_map(|e| e.ok().map(|e| e.path()))),
            Err(e) => {
                tracing::debug!(dir = %file_name(dir), error = %e, "model directory not read")
            }
        }
    }
    candidates.sort();
    candidates.dedup();
    candidates
        .into_iter()
        .filter_map(|path| match kind {
            EngineFiles::Gguf => gguf(&path),
            EngineFiles::MlxDir => mlx_dir(&path),
        })
        .collect()
}

fn gguf(path: &Path) -> Option<FoundModel> {
    let is_gguf = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("gguf"));
    if !is_gguf || !path.is_file() {
        return None;
    }
    let size = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    let meta = match read_gguf_metadata(path) {
        Ok(meta) => meta,
        Err(e) => {
            tracing::debug!(file = %file_name(path), error = %e, "GGUF metadata not read");
            return None;
        }
    };
    Some(FoundModel {
        name: meta.name.unwrap_or_else(|| file_name(path)),
        path: path.to_path_buf(),
        size,
        architecture: meta.architecture,
        context_length: meta.context_length,
    })
}

/// An MLX model directory: a `config.json` beside `.safetensors` weights.
fn mlx_dir(path: &Path) -> Option<FoundModel> {
    let config = std::fs::read_to_string(path.join("config.json")).ok()?;
    let weights: Vec<u64> = std::fs::read_dir(path)
        .ok()?
        .filter_map(Result::ok)
        .filter(|e| {
            e.path()
                .extension()
                .is_some_and(|x| x.eq_ignore_ascii_case("safetensors"))
        })
        .filter_map(|e| e.metadata().ok().map(|m| m.len()))
        .collect();
    if weights.is_empty() {
        return None;
    }
    let config: Value = serde_json::from_str(&config).ok()?;
    let context_length = ["max_position_embeddings", "max_sequence_length", "n_ctx"]
        .iter()
        .find_map(|k| config.get(*k).and_then(Value::as_u64))
        .and_then(|n| u32::try_from(n).ok());
    Some(FoundModel {
        name: file_name(path),
        path: path.to_path_buf(),
        size: weights.iter().sum(),
        architecture: config
            .get("model_type")
            .and_then(Value::as_str)
            .map(str::to_string),
        context_length,
    })
}

#[cfg(test)]
mod tests {
    use super::super::gguf::fixture::{Value as G, gguf_bytes};
    use super::*;

    #[test]
    fn finds_gguf_files_and_mlx_dirs_and_skips_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(
            d.join("tiny.gguf"),
            gguf_bytes(&[
                ("general.architecture", G::Str("llama".into())),
                ("llama.context_length", G::U32(4096)),
            ]),
        )
        .unwrap();
        std::fs::write(d.join("broken.gguf"), b"not a model").unwrap();
        std::fs::write(d.join("notes.txt"), b"hi").unwrap();
        let mlx = d.join("qwen-mlx");
        std::fs::create_dir(&mlx).unwrap();
        std::fs::write(
            mlx.join("config.json"),
            r#"{"model_type":"qwen3","max_position_embeddings":32768}"#,
        )
        .unwrap();
        std::fs::write(mlx.join("model.safetensors"), [0u8; 10]).unwrap();
        std::fs::create_dir(d.join("empty")).unwrap();

        let extra = tempfile::tempdir().unwrap();
        let named = extra.path().join("named.GGUF");
        std::fs::write(
            &named,
            gguf_bytes(&[("general.name", G::Str("Named".into()))]),
        )
        .unwrap();

        let ggufs = find(
            EngineFiles::Gguf,
            &[d.to_path_buf()],
            std::slice::from_ref(&named),
        );
        let names: Vec<_> = ggufs.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(ggufs.len(), 2, "{names:?}");
        let tiny = ggufs.iter().find(|m| m.name == "tiny.gguf").unwrap();
        assert_eq!(tiny.architecture.as_deref(), Some("llama"));
        assert_eq!(tiny.context_length, Some(4096));
        assert!(tiny.size > 0);
        assert!(ggufs.iter().any(|m| m.name == "Named" && m.path == named));

        let mlx_found = find(EngineFiles::MlxDir, &[d.to_path_buf()], &[]);
        assert_eq!(mlx_found.len(), 1);
        assert_eq!(mlx_found[0].name, "qwen-mlx");
        assert_eq!(mlx_found[0].architecture.as_deref(), Some("qwen3"));
        assert_eq!(mlx_found[0].context_length, Some(32_768));
        assert_eq!(mlx_found[0].size, 10);

        // A directory that does not exist is no error.
        assert!(find(EngineFiles::Gguf, &[d.join("nope")], &[]).is_empty());
    }
}
