//! The JSONL session file's lines, read and written: the header, rows and
//! states, what a load repairs (a torn *last* write only) and what it
//! refuses (everything else), and what can still be told of a file it
//! refuses (its id and keys), so that a damaged chat is never silently
//! replaced by a new one under the same keys.

use std::path::Path;

use lrg_providers::Message;
use serde::{Deserialize, Serialize};

use super::{
    FORMAT_VERSION, SessionId, SessionKeys, SessionMeta, SessionState, SessionSummary, StoreError,
    StoredSession, loaded,
};

#[derive(Serialize, Deserialize)]
struct Header {
    lrg_session: u32,
    #[serde(flatten)]
    meta: SessionMeta,
}

/// Only the version, read first so a newer file is refused by its version
/// rather than by a field this lrg does not know.
#[derive(Deserialize)]
struct Version {
    lrg_session: u32,
}

#[derive(Serialize)]
#[serde(rename_all = "snake_case")]
enum LineOut<'a> {
    Row(&'a Message),
    State(&'a SessionState),
}

#[derive(Deserialize)]
#[serde(rename_all = "snake_case")]
enum LineIn {
    Row(Message),
    State(SessionState),
}

/// What a session's lock file holds: its id and keys, written before the
/// session file exists, so a session whose file is later damaged (even
/// emptied) still tells whose it is.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct LockNote {
    pub(super) id: SessionId,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) keys: Option<SessionKeys>,
}

impl LockNote {
    /// The note of `meta`: an archived session's names no keys (it has
    /// released them).
    pub(super) fn of(meta: &SessionMeta) -> Self {
        Self {
            id: meta.id.clone(),
            keys: meta.live_keys().cloned(),
        }
    }

    pub(super) fn to_bytes(&self) -> Vec<u8> {
        let mut out = serde_json::to_vec(self).unwrap_or_default();
        out.push(b'\n');
        out
    }

    /// The note in `bytes`, if they hold one (an older lrg left lock files
    /// empty).
    pub(super) fn parse(bytes: &[u8]) -> Option<Self> {
        let line = bytes.split(|&b| b == b'\n').next()?;
        serde_json::from_slice(line).ok()
    }
}

pub(super) fn header_line(meta: &SessionMeta) -> Vec<u8> {
    let mut out = serde_json::to_vec(&Header {
        lrg_session: FORMAT_VERSION,
        meta: meta.clone(),
    })
    .unwrap_or_default();
    out.push(b'\n');
    out
}

/// The lines for `rows` then `state`, ready for one `write_all`. With
/// `setup_on_file`, the file holds the state's setup already: the state
/// line leaves it out, and a load keeps the one before (see [`parse`]).
pub(super) fn step_lines(
    rows: &[Message],
    state: &SessionState,
    setup_on_file: bool,
) -> Result<Vec<u8>, StoreError> {
    let without_setup;
    let state = if setup_on_file && state.setup.is_some() {
        without_setup = SessionState {
            setup: None,
            ..state.clone()
        };
        &without_setup
    } else {
        state
    };
    let mut out = Vec::new();
    let mut line = |l: LineOut<'_>| -> Result<(), StoreError> {
        serde_json::to_writer(&mut out, &l)
            .map_err(|e| StoreError::Database(format!("cannot encode a row: {e}")))?;
        out.push(b'\n');
        Ok(())
    };
    for row in rows {
        line(LineOut::Row(row))?;
    }
    line(LineOut::State(state))?;
    Ok(out)
}

/// The lines for `rows` alone (an archive holds no state).
pub(super) fn row_lines(rows: &[Message]) -> Result<Vec<u8>, StoreError> {
    let mut out = Vec::new();
    for row in rows {
        serde_json::to_writer(&mut out, &LineOut::Row(row))
            .map_err(|e| StoreError::Database(format!("cannot encode a row: {e}")))?;
        out.push(b'\n');
    }
    Ok(out)
}

pub(super) fn corrupt(path: &Path, line: usize, reason: impl Into<String>) -> StoreError {
    StoreError::Corrupt {
        file: path.to_path_buf(),
        line,
        reason: reason.into(),
    }
}

pub(super) fn parse_header(path: &Path, line: &[u8]) -> Result<SessionMeta, StoreError> {
    let version: Version = serde_json::from_slice(line)
        .map_err(|e| corrupt(path, 1, format!("not an lrg session header ({e})")))?;
    if version.lrg_session > FORMAT_VERSION {
        return Err(StoreError::FutureVersion {
            file: path.to_path_buf(),
            found: version.lrg_session,
        });
    }
    let header: Header = serde_json::from_slice(line)
        .map_err(|e| corrupt(path, 1, format!("bad session header ({e})")))?;
    Ok(header.meta)
}

/// The header line of `bytes`, or the error for a file without one.
fn header_of<'b>(path: &Path, bytes: &'b [u8]) -> Result<(&'b [u8], &'b [u8]), StoreError> {
    match bytes.iter().position(|&b| b == b'\n') {
        Some(end) => Ok((&bytes[..end], &bytes[end + 1..])),
        None if bytes.is_empty() => Err(corrupt(
            path,
            1,
            "truncated header (the file is empty: it was emptied after lrg wrote it)",
        )),
        None => Err(corrupt(
            path,
            1,
            "truncated header (the file ends before its first line does)",
        )),
    }
}

/// Whether `bytes` hold nothing but NUL bytes and line ends: what a crash
/// leaves where a file's size grew before its data reached the disk.
fn blank(bytes: &[u8]) -> bool {
    bytes.iter().all(|&b| b == 0 || b == b'\n')
}

fn nul_line(path: &Path, number: usize, len: usize) -> StoreError {
    corrupt(
        path,
        number,
        format!(
            "a line of {len} NUL byte(s) with more rows after it (damage, not a torn last write)"
        ),
    )
}

/// Read a whole session file. Only a torn *last* write is repaired: a last
/// line without its newline, or a tail of NUL bytes. Anything else that
/// does not parse — a NUL line with rows after it included — is an error
/// naming the file and line, and nothing is dropped.
pub(super) fn parse(
    path: &Path,
    bytes: &[u8],
    id: Option<&SessionId>,
) -> Result<StoredSession, StoreError> {
    let (header, body) = header_of(path, bytes)?;
    let meta = parse_header(path, header)?;
    if let Some(id) = id
        && meta.id != *id
    {
        return Err(corrupt(
            path,
            1,
            format!("the header names session `{}`", meta.id),
        ));
    }
    let mut rows = Vec::new();
    let mut state = SessionState {
        updated_ms: meta.created_ms,
        ..SessionState::default()
    };
    let mut warnings = Vec::new();
    let mut rest = body;
    let mut number = 1;
    while !rest.is_empty() {
        number += 1;
        let (line, torn) = match rest.iter().position(|&b| b == b'\n') {
            Some(end) => {
                let line = &rest[..end];
                rest = &rest[end + 1..];
                (line, false)
            }
            None => {
                let line = rest;
                rest = &[];
                (line, true)
            }
        };
        let zeros = line.iter().all(|&b| b == 0);
        if torn || (zeros && blank(rest)) {
            warnings.push(format!(
                "{}:{number}: dropped a torn last line ({} bytes): a write was cut short, \
                 so the last step in flight was lost",
                path.display(),
                line.len()
            ));
            break;
        }
        if zeros {
            // Rows follow it: not a write cut short but damage, and
            // dropping from here would lose what was acknowledged.
            return Err(nul_line(path, number, line.len()));
        }
        match serde_json::from_slice::<LineIn>(line) {
            Ok(LineIn::Row(row)) => rows.push(row),
            Ok(LineIn::State(mut s)) => {
                // A setup is written once; the states after it leave it out.
                if s.setup.is_none() {
                    s.setup = state.setup.take();
                }
                state = s;
            }
            Err(e) => return Err(corrupt(path, number, format!("unreadable line ({e})"))),
        }
    }
    Ok(loaded(meta, state, rows, warnings))
}

/// The summary of one file, read without decoding every row (a listing
/// stays fast), but with every line's kind checked, so that a line that
/// is neither a row nor a state (a NUL line in the middle) lists the
/// session as damaged; a row that does not decode is found when the
/// session is loaded.
pub(super) fn summarize(path: &Path, bytes: &[u8]) -> Result<SessionSummary, StoreError> {
    let (header, body) = header_of(path, bytes)?;
    let meta = parse_header(path, header)?;
    let mut rows = 0;
    let mut updated_ms = meta.created_ms;
    let mut previous_tool = false;
    let mut first_message = None;
    let mut rest = body;
    let mut number = 1;
    while !rest.is_empty() {
        number += 1;
        let Some(end) = rest.iter().position(|&b| b == b'\n') else {
            break; // a torn last line
        };
        let line = &rest[..end];
        rest = &rest[end + 1..];
        if line.starts_with(b"{\"row\"") {
            // Decoded, not only counted: a listing must call damaged what a
            // resume would refuse (a half-written row, a NUL inside one, a
            // row that is JSON but no message).
            match serde_json::from_slice::<LineIn>(line) {
                Err(e) => {
                    return Err(corrupt(
                        path,
                        number,
                        format!("a row that does not decode ({e}; damage, not a torn last write)"),
                    ));
                }
                // Decoded anyway: the first user message is the chat's title.
                Ok(LineIn::Row(row)) if first_message.is_none() => {
                    first_message = super::first_message(std::slice::from_ref(&row));
                }
                Ok(_) => {}
            }
            // Results written one by one count as the one row they become.
            let tool = line.starts_with(b"{\"row\":{\"role\":\"tool\"");
            if !(tool && previous_tool) {
                rows += 1;
            }
            previous_tool = tool;
        } else if line.starts_with(b"{\"state\"") {
            if let Ok(LineIn::State(s)) = serde_json::from_slice(line) {
                updated_ms = s.updated_ms;
            }
        } else if line.iter().all(|&b| b == 0) {
            if blank(rest) {
                break; // a torn tail of NUL bytes
            }
            return Err(nul_line(path, number, line.len()));
        } else {
            return Err(corrupt(
                path,
                number,
                "a line that is neither a row nor a state (damage, not a torn last write)",
            ));
        }
    }
    Ok(SessionSummary {
        meta,
        rows,
        updated_ms,
        first_message,
    })
}

/// What a damaged file still tells: its id and keys (none once archived),
/// from whatever of the header parses as JSON (a newer format's header
/// does).
pub(super) fn salvage(bytes: &[u8]) -> (Option<SessionId>, Option<SessionKeys>) {
    let line = bytes.split(|&b| b == b'\n').next().unwrap_or_default();
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(line) else {
        return (None, None);
    };
    let id = value
        .get("id")
        .and_then(|v| v.as_str())
        .and_then(|s| s.parse().ok());
    // An archived session has released its keys: its damage holds none.
    let archived = value.get("archived").and_then(|a| a.as_bool()) == Some(true);
    let keys = value
        .get("keys")
        .filter(|_| !archived)
        .and_then(|k| serde_json::from_value(k.clone()).ok());
    (id, keys)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn good() -> (SessionMeta, Vec<u8>) {
        let meta = SessionMeta::new(super::super::ModelBinding::new("p:m"));
        let mut bytes = header_line(&meta);
        bytes.extend(step_lines(&[Message::user("hi")], &SessionState::default(), false).unwrap());
        (meta, bytes)
    }

    #[test]
    fn a_torn_last_line_is_dropped_and_said() {
        let (meta, mut bytes) = good();
        bytes.extend_from_slice(b"{\"row\":{\"role\":\"assi");
        let s = parse(Path::new("x.jsonl"), &bytes, Some(&meta.id)).unwrap();
        assert_eq!(s.rows, vec![Message::user("hi")]);
        assert_eq!(s.warnings.len(), 1);
        assert!(s.warnings[0].starts_with("x.jsonl:4: dropped a torn last line"));
    }

    #[test]
    fn a_nul_tail_is_torn_but_a_nul_line_before_rows_is_damage() {
        let (meta, bytes) = good();
        let mut tail = bytes.clone();
        tail.extend_from_slice(&[0; 40]);
        tail.extend_from_slice(b"\n\0\0\n");
        let s = parse(Path::new("x.jsonl"), &tail, Some(&meta.id)).unwrap();
        assert_eq!(s.rows.len(), 1);
        assert_eq!(s.warnings.len(), 1);

        let mut middle = header_line(&meta);
        middle.extend_from_slice(&[0; 40]);
        middle.push(b'\n');
        middle.extend_from_slice(&bytes[bytes.iter().position(|&b| b == b'\n').unwrap() + 1..]);
        let err = parse(Path::new("x.jsonl"), &middle, Some(&meta.id)).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("x.jsonl:2: a line of 40 NUL byte(s)")
        );
    }

    #[test]
    fn a_newer_header_still_tells_its_keys() {
        let keys = SessionKeys::new("me", "doc:1").unwrap();
        let meta = SessionMeta::new(super::super::ModelBinding::new("p:m")).with_keys(keys.clone());
        let line = String::from_utf8(header_line(&meta)).unwrap().replacen(
            "\"lrg_session\":1",
            "\"lrg_session\":7",
            1,
        );
        let err = parse(Path::new("x.jsonl"), line.as_bytes(), None).unwrap_err();
        assert!(err.to_string().contains("written by a newer lrg"), "{err}");
        assert_eq!(salvage(line.as_bytes()), (Some(meta.id), Some(keys)));
    }
}
