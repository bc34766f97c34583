//! Reading a GGUF file's metadata (name, architecture, trained context
//! length) from its header, without loading the model: only the key/value
//! section is read, and everything not needed is skipped by seeking.

use std::collections::HashMap;
use std::io::{self, BufReader, Read, Seek};
use std::path::Path;

/// What the catalog shows of a GGUF file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct GgufMetadata {
    /// `general.name`, when the file has one.
    pub name: Option<String>,
    /// `general.architecture` (`llama`, `qwen3`, ...).
    pub architecture: Option<String>,
    /// `<architecture>.context_length`: the context the model was trained for.
    pub context_length: Option<u32>,
}

/// Why a file's metadata could not be read. Messages never name the file:
/// the caller adds the file name it wants to show.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GgufError {
    /// The file does not start with `GGUF`.
    #[error("not a GGUF file")]
    NotGguf,
    /// A GGUF version this reader does not know (only 2 and 3 are read).
    #[error("GGUF version {0} is not supported (2 and 3 are)")]
    Version(u32),
    /// The header is cut short or holds impossible sizes.
    #[error("the GGUF header is damaged: {0}")]
    Damaged(String),
    /// Reading failed.
    #[error("cannot read the file: {0}")]
    Io(#[from] io::Error),
}

/// The metadata of the GGUF file at `path`.
pub fn read_gguf_metadata(path: &Path) -> Result<GgufMetadata, GgufError> {
    let file = std::fs::File::open(path)?;
    read_metadata(&mut BufReader::new(file))
}

/// Longest key or kept string value read into memory.
const MAX_STRING: u64 = 1 << 16;
/// More key/value pairs than this is a damaged header, not a model.
const MAX_KV: u64 = 1 << 20;
/// Arrays nest at most this deep.
const MAX_DEPTH: u32 = 4;

const TYPE_STRING: u32 = 8;
const TYPE_ARRAY: u32 = 9;

/// The metadata in a GGUF stream positioned at its start.
pub fn read_metadata<R: Read + Seek>(r: &mut R) -> Result<GgufMetadata, GgufError> {
    let mut magic = [0u8; 4];
    r.read_exact(&mut magic).map_err(eof_is_not_gguf)?;
    if &magic != b"GGUF" {
        return Err(GgufError::NotGguf);
    }
    let version = read_u32(r)?;
    if !(2..=3).contains(&version) {
        return Err(GgufError::Version(version));
    }
    let _tensors = read_u64(r)?;
    let kv_count = read_u64(r)?;
    if kv_count > MAX_KV {
        return Err(GgufError::Damaged(format!("{kv_count} metadata entries")));
    }
    let mut meta = GgufMetadata::default();
    // The architecture usually comes first, but nothing requires it.
    let mut lengths: HashMap<String, u32> = HashMap::new();
    for _ in 0..kv_count {
        let key = read_string(r)?;
        let ty = read_u32(r)?;
        match (key.as_str(), ty) {
            ("general.architecture", TYPE_STRING) => meta.architecture = Some(read_string(r)?),
            ("general.name", TYPE_STRING) => meta.name = Some(read_string(r)?),
            (k, _) if k.ends_with(".context_length") => {
                if let Some(n) = read_int(r, ty)? {
                    lengths.insert(k.to_string(), n);
                }
            }
            _ => skip_value(r, ty, 0)?,
        }
        let known = meta
            .architecture
            .as_ref()
            .map(|a| lengths.contains_key(&format!("{a}.context_length")));
        if meta.name.is_some() && known == Some(true) {
            break;
        }
    }
    meta.context_length = meta
        .architecture
        .as_ref()
        .and_then(|a| lengths.get(&format!("{a}.context_length")).copied());
    Ok(meta)
}

fn eof_is_not_gguf(e: io::Error) -> GgufError {
    if e.kind() == io::ErrorKind::UnexpectedEof {
        GgufError::NotGguf
    } else {
        GgufError::Io(e)
    }
}

fn damaged(e: io::Error) -> GgufError {
    if e.kind() == io::ErrorKind::UnexpectedEof {
        GgufError::Damaged("it ends early".into())
    } else {
        GgufError::Io(e)
    }
}

fn read_u32<R: Read>(r: &mut R) -> Result<u32, GgufError> {
    let mut b = [0u8; 4];
    r.read_exact(&mut b).map_err(damaged)?;
    Ok(u32::from_le_bytes(b))
}

fn read_u64<R: Read>(r: &mut R) -> Result<u64, GgufError> {
    let mut b = [0u8; 8];
    r.read_exact(&mut b).map_err(damaged)?;
    Ok(u64::from_le_bytes(b))
}

fn read_string<R: Read>(r: &mut R) -> Result<String, GgufError> {
    let len = read_u64(r)?;
    if len > MAX_STRING {
        return Err(GgufError::Damaged(format!("a {len}-byte key or name")));
    }
    let mut buf = vec![0u8; len as usize];
    r.read_exact(&mut buf).map_err(damaged)?;
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

/// An integer value as `u32` (`None` when it is another type or too large).
fn read_int<R: Read + Seek>(r: &mut R, ty: u32) -> Result<Option<u32>, GgufError> {
    Ok(match ty {
        4 => Some(read_u32(r)?),
        5 => u32::try_from(read_u32(r)? as i32).ok(),
        10 => u32::try_from(read_u64(r)?).ok(),
        11 => u32::try_from(read_u64(r)? as i64).ok(),
        _ => {
            skip_value(r, ty, 0)?;
            None
        }
    })
}

/// Size in bytes of a fixed-size value type.
fn fixed_size(ty: u32) -> Option<u64> {
    match ty {
        0 | 1 | 7 => Some(1),
        2 | 3 => Some(2),
        4..=6 => Some(4),
        10..=12 => Some(8),
        _ => None,
    }
}

fn skip<R: Seek>(r: &mut R, bytes: u64) -> Result<(), GgufError> {
    let bytes =
        i64::try_from(bytes).map_err(|_| GgufError::Damaged(format!("a {bytes}-byte value")))?;
    r.seek_relative(bytes)?;
    Ok(())
}

fn skip_value<R: Read + Seek>(r: &mut R, ty: u32, depth: u32) -> Result<(), GgufError> {
    if let Some(size) = fixed_size(ty) {
        return skip(r, size);
    }
    match ty {
        TYPE_STRING => {
            let len = read_u64(r)?;
            skip(r, len)
        }
        TYPE_ARRAY if depth < MAX_DEPTH => {
            let elem = read_u32(r)?;
            let count = read_u64(r)?;
            if let Some(size) = fixed_size(elem) {
                let bytes = count
                    .checked_mul(size)
                    .ok_or_else(|| GgufError::Damaged(format!("an array of {count} values")))?;
                return skip(r, bytes);
            }
            // Strings and nested arrays: each has its own length. A count
            // larger than the file runs into its end and fails there.
            for _ in 0..count {
                skip_value(r, elem, depth + 1)?;
            }
            Ok(())
        }
        TYPE_ARRAY => Err(GgufError::Damaged("arrays nested too deep".into())),
        other => Err(GgufError::Damaged(format!("unknown value type {other}"))),
    }
}

/// Writing small GGUF headers by hand, for tests here and in other crates'
/// tests: just the metadata a reader looks at, and no tensors.
pub mod fixture {
    /// A GGUF v3 header with these metadata entries and no tensors.
    pub fn gguf_bytes(entries: &[(&str, Value)]) -> Vec<u8> {
        let mut out = b"GGUF".to_vec();
        out.extend(3u32.to_le_bytes());
        out.extend(0u64.to_le_bytes());
        out.extend((entries.len() as u64).to_le_bytes());
        for (key, value) in entries {
            put_str(&mut out, key);
            value.put(&mut out, true);
        }
        out
    }

    /// A metadata value.
    #[derive(Debug, Clone)]
    pub enum Value {
        /// `UINT32`.
        U32(u32),
        /// `UINT64`.
        U64(u64),
        /// `FLOAT32`.
        F32(f32),
        /// `STRING`.
        Str(String),
        /// `ARRAY` of strings.
        Strs(Vec<String>),
        /// `ARRAY` of `INT32`.
        I32s(Vec<i32>),
    }

    fn put_str(out: &mut Vec<u8>, s: &str) {
        out.extend((s.len() as u64).to_le_bytes());
        out.extend(s.as_bytes());
    }

    impl Value {
        fn put(&self, out: &mut Vec<u8>, typed: bool) {
            let ty: u32 = match self {
                Value::U32(_) => 4,
                Value::U64(_) => 10,
                Value::F32(_) => 6,
                Value::Str(_) => 8,
                Value::Strs(_) | Value::I32s(_) => 9,
            };
            if typed {
                out.extend(ty.to_le_bytes());
            }
            match self {
                Value::U32(n) => out.extend(n.to_le_bytes()),
                Value::U64(n) => out.extend(n.to_le_bytes()),
                Value::F32(n) => out.extend(n.to_le_bytes()),
                Value::Str(s) => put_str(out, s),
                Value::Strs(items) => {
                    out.extend(8u32.to_le_bytes());
                    out.extend((items.len() as u64).to_le_bytes());
                    for s in items {
                        put_str(out, s);
                    }
                }
                Value::I32s(items) => {
                    out.extend(5u32.to_le_bytes());
                    out.extend((items.len() as u64).to_le_bytes());
                    for n in items {
                        out.extend(n.to_le_bytes());
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::fixture::{Value, gguf_bytes};
    use super::*;
    use std::io::Cursor;

    fn tiny() -> Vec<u8> {
        gguf_bytes(&[
            ("general.architecture", Value::Str("qwen3".into())),
            // Skipped on the way: arrays of strings and of numbers, a float.
            (
                "tokenizer.ggml.tokens",
                Value::Strs((0..500).map(|i| format!("tok{i}")).collect()),
            ),
            ("tokenizer.ggml.token_type", Value::I32s(vec![1; 500])),
            ("qwen3.rope.freq_base", Value::F32(1e6)),
            ("llama.context_length", Value::U32(2048)),
            ("qwen3.context_length", Value::U32(40_960)),
            ("general.name", Value::Str("Tiny Qwen".into())),
        ])
    }

    #[test]
    fn reads_name_architecture_and_the_architectures_context_length() {
        let meta = read_metadata(&mut Cursor::new(tiny())).unwrap();
        assert_eq!(meta.architecture.as_deref(), Some("qwen3"));
        assert_eq!(meta.name.as_deref(), Some("Tiny Qwen"));
        assert_eq!(meta.context_length, Some(40_960));
    }

    #[test]
    fn a_u64_context_length_and_a_missing_name() {
        let bytes = gguf_bytes(&[
            ("llama.context_length", Value::U64(131_072)),
            ("general.architecture", Value::Str("llama".into())),
        ]);
        let meta = read_metadata(&mut Cursor::new(bytes)).unwrap();
        assert_eq!((meta.name, meta.context_length), (None, Some(131_072)));
    }

    #[test]
    fn bad_input_is_an_error_never_a_panic() {
        assert!(matches!(
            read_metadata(&mut Cursor::new(b"GGML....".to_vec())),
            Err(GgufError::NotGguf)
        ));
        assert!(matches!(
            read_metadata(&mut Cursor::new(b"GG".to_vec())),
            Err(GgufError::NotGguf)
        ));
        let mut v1 = tiny();
        v1[4] = 1;
        assert!(matches!(
            read_metadata(&mut Cursor::new(v1)),
            Err(GgufError::Version(1))
        ));
        // Every truncation of a valid header fails cleanly (or, once the
        // wanted keys are read, succeeds).
        let whole = tiny();
        for cut in 0..whole.len() {
            let _ = read_metadata(&mut Cursor::new(whole[..cut].to_vec()));
        }
        // An absurd string length, an absurd array, an unknown type.
        let mut huge = b"GGUF".to_vec();
        huge.extend(3u32.to_le_bytes());
        huge.extend(0u64.to_le_bytes());
        huge.extend(1u64.to_le_bytes());
        huge.extend(u64::MAX.to_le_bytes());
        assert!(matches!(
            read_metadata(&mut Cursor::new(huge)),
            Err(GgufError::Damaged(_))
        ));
        let mut arr = b"GGUF".to_vec();
        arr.extend(3u32.to_le_bytes());
        arr.extend(0u64.to_le_bytes());
        arr.extend(2u64.to_le_bytes());
        arr.extend(1u64.to_le_bytes());
        arr.extend(b"a");
        arr.extend(9u32.to_le_bytes());
        arr.extend(8u32.to_le_bytes());
        arr.extend(u64::MAX.to_le_bytes());
        assert!(read_metadata(&mut Cursor::new(arr)).is_err());
        let mut unknown = b"GGUF".to_vec();
        unknown.extend(3u32.to_le_bytes());
        unknown.extend(0u64.to_le_bytes());
        unknown.extend(1u64.to_le_bytes());
        unknown.extend(1u64.to_le_bytes());
        unknown.extend(b"a");
        unknown.extend(99u32.to_le_bytes());
        assert!(matches!(
            read_metadata(&mut Cursor::new(unknown)),
            Err(GgufError::Damaged(_))
        ));
    }
}
