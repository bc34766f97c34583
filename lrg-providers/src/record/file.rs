//! The recording file: its types, loading with clear errors, atomic saving.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{ModelInfo, ProviderError, ProviderErrorKind, TurnEvent};

/// The `format` marker every recording carries.
pub const RECORDING_FORMAT: &str = "lrg-recording";

/// The recording version this build writes and reads.
pub const RECORDING_VERSION: u32 = 1;

/// A whole recording: which model answered, and every exchange in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Recording {
    /// Always [`RECORDING_FORMAT`].
    pub format: String,
    /// Always [`RECORDING_VERSION`] for files this build writes.
    pub version: u32,
    /// The recorded model, as it described itself.
    pub model: ModelInfo,
    /// Each model turn, in the order the requests were sent.
    pub exchanges: Vec<Exchange>,
}

/// One model turn: the request and what came back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Exchange {
    /// The [`crate::TurnRequest`] as JSON. Kept as a value (not re-typed) so
    /// replay compares exactly what was written.
    pub request: Value,
    /// The streamed events, in order.
    #[serde(default)]
    pub events: Vec<TurnEvent>,
    /// The error the turn ended with, if any.
    #[serde(default)]
    pub error: Option<RecordedError>,
    /// Whether the turn's stream ran to its end (or its error).
    #[serde(default)]
    pub complete: bool,
}

/// A [`ProviderError`] in a form that can be saved and restored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordedError {
    /// [`ProviderError::kind`].
    pub kind: ProviderErrorKind,
    /// The error's message (without the variant's prefix).
    pub message: String,
    /// The server's retry-after hint, for transient errors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_ms: Option<u64>,
}

impl RecordedError {
    /// Capture an error.
    pub fn from_error(err: &ProviderError) -> Self {
        Self {
            kind: err.kind(),
            message: err.message().to_string(),
            retry_after_ms: err
                .retry_after()
                .map(|d| d.as_millis().min(u64::MAX as u128) as u64),
        }
    }

    /// The error as it was raised. An unknown kind (a newer lrg wrote it)
    /// becomes [`ProviderError::Other`], which is fatal.
    pub fn to_error(&self) -> ProviderError {
        match ProviderError::of_kind(self.kind, self.message.clone()) {
            ProviderError::Transient { message, .. } => ProviderError::Transient {
                message,
                retry_after: self.retry_after_ms.map(Duration::from_millis),
            },
            other => other,
        }
    }
}

/// Why a recording could not be read or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RecordError {
    /// The file could not be read or written.
    #[error("recording {path}: {source}")]
    Io {
        /// The recording's path.
        path: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
    /// The file is not a recording this build understands.
    #[error("recording {path} is not valid: {message}")]
    Invalid {
        /// The recording's path.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
}

impl From<RecordError> for ProviderError {
    fn from(err: RecordError) -> Self {
        ProviderError::Config {
            message: err.to_string(),
        }
    }
}

impl Recording {
    /// An empty recording of `model`.
    pub fn new(model: ModelInfo) -> Self {
        Self {
            format: RECORDING_FORMAT.to_string(),
            version: RECORDING_VERSION,
            model,
            exchanges: Vec::new(),
        }
    }

    /// Parse a recording from JSON text; `path` only names it in errors.
    pub fn from_json(path: &Path, json: &str) -> Result<Self, RecordError> {
        let invalid = |message: String| RecordError::Invalid {
            path: path.to_path_buf(),
            message,
        };
        // Check the header first so a wrong file or a newer version gets a
        // message about that rather than about some field deep inside.
        let value: Value =
            serde_json::from_str(json).map_err(|e| invalid(format!("not JSON: {e}")))?;
        match value.get("format").and_then(Value::as_str) {
            Some(RECORDING_FORMAT) => {}
            _ => {
                return Err(invalid(format!(
                    "missing \"format\": \"{RECORDING_FORMAT}\" (is this a recording written by `--record`?)"
                )));
            }
        }
        match value.get("version").and_then(Value::as_u64) {
            Some(v) if v == u64::from(RECORDING_VERSION) => {}
            Some(v) => {
                return Err(invalid(format!(
                    "version {v} is not supported; this lrg reads version {RECORDING_VERSION}"
                )));
            }
            None => return Err(invalid("missing \"version\"".to_string())),
        }
        serde_json::from_value(value).map_err(|e| invalid(e.to_string()))
    }

    /// Load a recording from a file.
    pub fn load(path: impl AsRef<Path>) -> Result<Self, RecordError> {
        let path = path.as_ref();
        let json = std::fs::read_to_string(path).map_err(|source| RecordError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Self::from_json(path, &json)
    }

    /// The recording as pretty JSON, ending with a newline.
    pub fn to_json(&self) -> String {
        // Serializing plain data into a string cannot fail; fall back to an
        // empty document rather than panicking if serde ever says otherwise.
        let mut text = serde_json::to_string_pretty(self).unwrap_or_default();
        text.push('\n');
        text
    }

    /// Write the recording to `path` atomically: a temporary file in the same
    /// directory, flushed to disk, then renamed over `path`.
    pub fn save(&self, path: impl AsRef<Path>) -> Result<(), RecordError> {
        let path = path.as_ref();
        let io = |source| RecordError::Io {
            path: path.to_path_buf(),
            source,
        };
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
        let result = (|| {
            let mut file = std::fs::File::create(&tmp)?;
            file.write_all(self.to_json().as_bytes())?;
            file.sync_all()?;
            std::fs::rename(&tmp, path)
        })();
        if result.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        result.map_err(io)
    }
}

/// A request as the JSON value a recording holds. It goes through text so
/// that numbers compare the same whether they were just serialized or read
/// back from a file (an `f32` temperature would otherwise widen differently).
///
/// Keys are sorted, so the file and a diff read the same whether or not
/// serde_json's `preserve_order` feature is on in the build.
pub(crate) fn request_value(request: &crate::TurnRequest) -> Result<Value, ProviderError> {
    serde_json::to_string(request)
        .and_then(|text| serde_json::from_str(&text))
        .map(canonical)
        .map_err(|e| ProviderError::Other {
            message: format!("cannot serialize the request: {e}"),
        })
}

/// `value` with every object's keys in sorted order.
pub(crate) fn canonical(value: Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(String, Value)> = map.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Object(
                entries
                    .into_iter()
                    .map(|(k, v)| (k, canonical(v)))
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(items.into_iter().map(canonical).collect()),
        other => other,
    }
}
