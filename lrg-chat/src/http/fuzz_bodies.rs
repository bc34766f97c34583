//! The body of the `http_bodies` fuzz target (`fuzz/fuzz_targets/`), here
//! beside the bodies it reads so it needs nothing of them made public.

use serde_json::Value;

use super::body::parse_json;
use super::routes::{
    ApprovalBody, MessageBody, OpenBody, PermissionsBody, SwitchBody, message_input, open_spec,
};

/// Byte 0 picks a route's body (open, message, switch, approval,
/// permissions), the rest is the body as a client sends it, read as the
/// route reads it. Arbitrary bytes never panic; a body that is accepted is
/// one JSON object with nothing after it (or empty); a refused one is a 400
/// or a 413, never a 500, and its message names no source file.
pub(crate) fn http_bodies(data: &[u8]) {
    let Some((&pick, body)) = data.split_first() else {
        return;
    };
    let result = match pick % 5 {
        0 => parse_json::<OpenBody>(body).and_then(open_spec).map(drop),
        1 => parse_json::<MessageBody>(body)
            .and_then(|b| message_input(b, 100_000))
            .map(drop),
        2 => parse_json::<SwitchBody>(body).map(drop),
        3 => parse_json::<ApprovalBody>(body).map(drop),
        _ => parse_json::<PermissionsBody>(body).map(drop),
    };
    match result {
        Ok(()) => {
            let empty = body.iter().all(u8::is_ascii_whitespace);
            let object = serde_json::from_slice::<serde_json::Map<String, Value>>(body).is_ok();
            assert!(
                empty || object,
                "a body that is not one JSON object was taken"
            );
        }
        Err(e) => {
            assert!(
                matches!(e.status().as_u16(), 400 | 413),
                "a body was refused with {}",
                e.status()
            );
            let message = e.to_string();
            assert!(!message.contains(".rs:"), "{message}");
        }
    }
}
