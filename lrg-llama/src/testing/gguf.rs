//! A minimal GGUF v3 writer: metadata key/values and F32 tensors.
//!
//! Only what the tiny test model needs. Layout: header, metadata, tensor
//! infos, padding to the alignment, then each tensor's data at an aligned
//! offset (see the GGUF spec in the ggml repository).

use std::io::{self, Write};

/// GGUF's default (and our only) alignment of the data section and tensors.
const ALIGNMENT: usize = 32;

/// One metadata value.
#[derive(Debug, Clone)]
pub(crate) enum Value {
    U32(u32),
    F32(f32),
    Bool(bool),
    Str(String),
    StrArray(Vec<String>),
    F32Array(Vec<f32>),
    I32Array(Vec<i32>),
}

// GGUF value type ids.
const T_U32: u32 = 4;
const T_I32: u32 = 5;
const T_F32: u32 = 6;
const T_BOOL: u32 = 7;
const T_STRING: u32 = 8;
const T_ARRAY: u32 = 9;
// ggml tensor type id of F32.
const GGML_F32: u32 = 0;

/// One F32 tensor: its ggml shape (`ne[0]` first, the fastest-varying
/// dimension) and its values in that order.
#[derive(Debug, Clone)]
pub(crate) struct Tensor {
    pub name: String,
    pub shape: Vec<u64>,
    pub data: Vec<f32>,
}

/// A GGUF file being assembled in memory.
#[derive(Debug, Default)]
pub(crate) struct GgufFile {
    metadata: Vec<(String, Value)>,
    tensors: Vec<Tensor>,
}

impl GgufFile {
    pub fn kv(&mut self, key: &str, value: Value) {
        self.metadata.push((key.to_string(), value));
    }

    pub fn tensor(&mut self, name: impl Into<String>, shape: &[u64], data: Vec<f32>) {
        self.tensors.push(Tensor {
            name: name.into(),
            shape: shape.to_vec(),
            data,
        });
    }

    /// Serializes the file. Fails if a tensor's data does not match its shape,
    /// which would make llama.cpp read past the data.
    pub fn write(&self, out: &mut impl Write) -> io::Result<()> {
        let mut buf = Vec::new();
        buf.extend_from_slice(b"GGUF");
        put_u32(&mut buf, 3);
        put_u64(&mut buf, self.tensors.len() as u64);
        put_u64(&mut buf, self.metadata.len() as u64);
        for (key, value) in &self.metadata {
            put_str(&mut buf, key);
            put_value(&mut buf, value);
        }
        let mut offset = 0usize;
        for t in &self.tensors {
            let expected: u64 = t.shape.iter().product();
            if expected != t.data.len() as u64 {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "tensor {} has {} values for shape {:?}",
                        t.name,
                        t.data.len(),
                        t.shape
                    ),
                ));
            }
            put_str(&mut buf, &t.name);
            put_u32(&mut buf, t.shape.len() as u32);
            for d in &t.shape {
                put_u64(&mut buf, *d);
            }
            put_u32(&mut buf, GGML_F32);
            put_u64(&mut buf, offset as u64);
            offset = align(offset + t.data.len() * 4);
        }
        buf.resize(align(buf.len()), 0);
        for t in &self.tensors {
            for v in &t.data {
                buf.extend_from_slice(&v.to_le_bytes());
            }
            buf.resize(align(buf.len()), 0);
        }
        out.write_all(&buf)
    }
}

fn align(n: usize) -> usize {
    n.div_ceil(ALIGNMENT) * ALIGNMENT
}

fn put_u32(buf: &mut Vec<u8>, v: u32) {
    buf.extend_from_slice(&v.to_le_bytes());
}

fn put_u64(buf: &mut Vec<u8>, v: u64) {
    buf.extend_from_slice(&v.to_le_bytes());
}

fn put_str(buf: &mut Vec<u8>, s: &str) {
    put_u64(buf, s.len() as u64);
    buf.extend_from_slice(s.as_bytes());
}

fn put_value(buf: &mut Vec<u8>, value: &Value) {
    match value {
        Value::U32(v) => {
            put_u32(buf, T_U32);
            put_u32(buf, *v);
        }
        Value::F32(v) => {
            put_u32(buf, T_F32);
            buf.extend_from_slice(&v.to_le_bytes());
        }
        Value::Bool(v) => {
            put_u32(buf, T_BOOL);
            buf.push(u8::from(*v));
        }
        Value::Str(s) => {
            put_u32(buf, T_STRING);
            put_str(buf, s);
        }
        Value::StrArray(items) => {
            put_u32(buf, T_ARRAY);
            put_u32(buf, T_STRING);
            put_u64(buf, items.len() as u64);
            for s in items {
                put_str(buf, s);
            }
        }
        Value::F32Array(items) => {
            put_u32(buf, T_ARRAY);
            put_u32(buf, T_F32);
            put_u64(buf, items.len() as u64);
            for v in items {
                buf.extend_from_slice(&v.to_le_bytes());
            }
        }
        Value::I32Array(items) => {
            put_u32(buf, T_ARRAY);
            put_u32(buf, T_I32);
            put_u64(buf, items.len() as u64);
            for v in items {
                buf.extend_from_slice(&v.to_le_bytes());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_and_alignment() {
        let mut f = GgufFile::default();
        f.kv("general.architecture", Value::Str("llama".into()));
        f.tensor("a", &[3], vec![1.0, 2.0, 3.0]);
        f.tensor("b", &[2, 2], vec![0.0; 4]);
        let mut out = Vec::new();
        f.write(&mut out).unwrap();
        assert_eq!(&out[..4], b"GGUF");
        assert_eq!(u32::from_le_bytes(out[4..8].try_into().unwrap()), 3);
        assert_eq!(u64::from_le_bytes(out[8..16].try_into().unwrap()), 2);
        assert_eq!(u64::from_le_bytes(out[16..24].try_into().unwrap()), 1);
        // data section: a (12 bytes, padded to 32) then b (16 bytes, padded to 32)
        assert_eq!(out.len() % ALIGNMENT, 0);
        let data_start = out.len() - 64;
        assert_eq!(
            f32::from_le_bytes(out[data_start + 4..data_start + 8].try_into().unwrap()),
            2.0
        );
    }

    #[test]
    fn shape_mismatch_is_an_error() {
        let mut f = GgufFile::default();
        f.tensor("a", &[3, 2], vec![1.0]);
        assert!(f.write(&mut Vec::new()).is_err());
    }
}
