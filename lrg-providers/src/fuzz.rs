//! Bodies of the cargo-fuzz targets in `fuzz/` (one function per target).
//!
//! They live here, not in the fuzz crate, so the seed corpus of every target
//! runs through the very same code as an ordinary test
//! (`lrg-providers/tests/fuzz_corpus.rs`, a module of its one test binary) without cargo-fuzz or nightly. Each
//! takes arbitrary bytes, must not panic, and panics on purpose when an
//! invariant breaks (that is how a fuzzer reports it). Not API.

use crate::cli_agents::{self, CliKind};
use crate::local_chat::AnswerDecoder;
use crate::openai::ReasoningField;
use crate::record::Recording;
use crate::wire::{Decoder, Frame, Framer, Framing};
use crate::{TurnEvent, anthropic, gemini, ollama, openai, responses};

/// Chunk lengths for one irregular split of `data`, derived from the data
/// itself so a fuzzer that changes the input also changes where it is cut.
fn split_points(data: &[u8]) -> Vec<usize> {
    // FNV-1a of the input seeds a xorshift that draws chunk lengths 1..=17.
    let mut state = data.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    }) | 1;
    let mut cuts = Vec::new();
    let mut at = 0;
    while at < data.len() {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        at += 1 + usize::try_from(state % 17).unwrap_or(0);
        cuts.push(at.min(data.len()));
    }
    cuts
}

/// The frames `framing` finds in `data` when it arrives in the chunks that
/// end at `cuts` (each cut is an end offset, increasing).
fn frames_split(framing: Framing, data: &[u8], cuts: &[usize]) -> Vec<Frame> {
    let mut framer = Framer::new(framing);
    let mut out = Vec::new();
    let mut from = 0;
    for &to in cuts {
        framer.push(&data[from..to], &mut out);
        from = to;
    }
    framer.push(&data[from..], &mut out);
    framer.finish(&mut out);
    out
}

fn frames_whole(framing: Framing, data: &[u8]) -> Vec<Frame> {
    frames_split(framing, data, &[])
}

/// A framer sees the same frames however the body is cut: whole, one byte
/// at a time, and in irregular chunks; no frame holds more text than it was fed.
fn framer_target(framing: Framing, data: &[u8]) {
    let whole = frames_whole(framing, data);
    let bytewise: Vec<usize> = (1..=data.len()).collect();
    let irregular = split_points(data);
    for (name, cuts) in [("byte by byte", &bytewise), ("irregular", &irregular)] {
        let split = frames_split(framing, data, cuts);
        assert_eq!(
            whole, split,
            "{framing:?} frames differ when the body is fed {name}"
        );
    }
    // Lossy UTF-8 may widen an invalid byte to three; never more than that.
    let text: usize = whole
        .iter()
        .map(|f| f.data.len() + f.event.as_ref().map_or(0, String::len))
        .sum();
    assert!(
        text <= data.len() * 3,
        "{framing:?} frames hold {text} bytes from {} fed",
        data.len()
    );
}

/// Target `sse`: the SSE framer.
pub fn sse(data: &[u8]) {
    framer_target(Framing::Sse, data);
}

/// Target `ndjson`: the NDJSON framer.
pub fn ndjson(data: &[u8]) {
    framer_target(Framing::Ndjson, data);
}

/// Frame `data`, decode every frame until one fails, then finish unless one
/// failed. Errors are fine; a panic is not, nor events after `End`.
fn decode(framing: Framing, decoder: &mut dyn Decoder, data: &[u8]) {
    let mut events = Vec::new();
    let mut failed = false;
    for frame in frames_whole(framing, data) {
        if decoder.decode(&frame, &mut events).is_err() {
            failed = true;
            break;
        }
    }
    if !failed {
        let _ = decoder.finish(&mut events);
    }
    if let Some(end) = events
        .iter()
        .position(|e| matches!(e, TurnEvent::End { .. }))
    {
        assert_eq!(
            end + 1,
            events.len(),
            "events after End: {:?}",
            &events[end..]
        );
    }
}

/// Target `openai`: an OpenAI chat-completions stream through
/// [`openai::OpenAiDecoder`] (both reasoning fields read).
pub fn openai(data: &[u8]) {
    const FIELDS: &[ReasoningField] =
        &[ReasoningField::ReasoningContent, ReasoningField::Reasoning];
    decode(
        Framing::Sse,
        &mut openai::OpenAiDecoder::new(FIELDS, &[]),
        data,
    );
}

/// Target `anthropic`: an Anthropic Messages stream through
/// [`anthropic::AnthropicDecoder`].
pub fn anthropic(data: &[u8]) {
    decode(
        Framing::Sse,
        &mut anthropic::AnthropicDecoder::new("claude-fuzz"),
        data,
    );
}

/// Target `gemini`: a Gemini `streamGenerateContent?alt=sse` stream through
/// [`gemini::GeminiDecoder`].
pub fn gemini(data: &[u8]) {
    decode(
        Framing::Sse,
        &mut gemini::GeminiDecoder::new("gemini-fuzz"),
        data,
    );
}

/// Target `ollama`: an Ollama `/api/chat` NDJSON stream through
/// [`ollama::OllamaDecoder`].
pub fn ollama(data: &[u8]) {
    decode(Framing::Ndjson, &mut ollama::OllamaDecoder::new(&[]), data);
}

/// Target `responses`: an OpenAI Responses API stream through
/// [`responses::ResponsesDecoder`] (keeping the response id, so that path
/// runs too).
pub fn responses(data: &[u8]) {
    decode(
        Framing::Sse,
        &mut responses::ResponsesDecoder::new("openai-responses", "fuzz", true, &[]),
        data,
    );
}

/// Target `cli_agents`: a CLI agent's JSON-lines output. The first byte picks
/// the CLI (Claude Code, Codex, Gemini CLI); the rest is its stdout.
pub fn cli_agents(data: &[u8]) {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let kind = match pick % 3 {
        0 => CliKind::Claude,
        1 => CliKind::Codex,
        _ => CliKind::Gemini,
    };
    decode(
        Framing::Ndjson,
        cli_agents::stream_decoder(kind, "fuzz").as_mut(),
        rest,
    );
}

/// What an [`AnswerDecoder`] streamed: reasoning, text, or a tool call's
/// name (`Call(Some)`, its first delta) and arguments (`Call(None)`).
#[derive(Debug, PartialEq)]
enum Streamed {
    Reasoning,
    Text,
    Call(Option<String>),
}

/// What an [`AnswerDecoder`] streamed, with consecutive deltas of one kind
/// joined, so that feeds cut differently compare equal.
fn answer_events(text: &str, cuts: &[usize]) -> (Vec<(Streamed, String)>, String) {
    let mut decoder = AnswerDecoder::new();
    let mut joined: Vec<(Streamed, String)> = Vec::new();
    let mut take = |events: Vec<TurnEvent>| {
        for event in events {
            let (kind, delta) = match event {
                TurnEvent::ReasoningDelta { text } => (Streamed::Reasoning, text),
                TurnEvent::TextDelta { text } => (Streamed::Text, text),
                TurnEvent::ToolCallDelta {
                    index: 0,
                    name,
                    arguments_fragment,
                    ..
                } => (Streamed::Call(name), arguments_fragment),
                other => panic!("AnswerDecoder emitted {other:?}"),
            };
            match joined.last_mut() {
                Some((Streamed::Call(_), text)) if kind == Streamed::Call(None) => {
                    text.push_str(&delta)
                }
                Some((last, text)) if *last == kind && kind != Streamed::Call(None) => {
                    text.push_str(&delta)
                }
                _ => joined.push((kind, delta)),
            }
        }
    };
    let mut from = 0;
    for &to in cuts {
        // Cut only at character boundaries: the engine hands out whole chars.
        if text.is_char_boundary(to) && to > from {
            take(decoder.feed(&text[from..to]));
            from = to;
        }
    }
    take(decoder.feed(&text[from..]));
    (joined, decoder.into_raw())
}

/// Target `answer`: [`AnswerDecoder`] (LocalChatModel's streaming answer
/// decoder) gives the same text whether the answer arrives whole, one
/// character at a time, or in irregular chunks, and keeps it verbatim.
pub fn answer(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let (whole, raw) = answer_events(&text, &[]);
    assert_eq!(raw, text, "AnswerDecoder did not keep its input verbatim");
    let charwise: Vec<usize> = text.char_indices().map(|(i, c)| i + c.len_utf8()).collect();
    let irregular = split_points(data);
    for (name, cuts) in [("char by char", &charwise), ("irregular", &irregular)] {
        let (split, _) = answer_events(&text, cuts);
        assert_eq!(whole, split, "AnswerDecoder events differ when fed {name}");
    }
}

/// Target `recording`: the recording file reader. Whatever it accepts it can
/// write back, and what it writes it reads again.
pub fn recording(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let path = std::path::Path::new("fuzz.json");
    if let Ok(recording) = Recording::from_json(path, text) {
        let written = recording.to_json();
        if let Err(error) = Recording::from_json(path, &written) {
            panic!("a recording read back fails: {error}\n{written}");
        }
    }
}

/// The seed files of fuzz target `target` (`fuzz/corpus/TARGET/` in this
/// repository), sorted, with their bytes: the one corpus reader of every
/// crate's seed tests. Panics, as a test helper does, when the folder cannot
/// be read or holds fewer than `min` seeds.
pub fn corpus(target: &str, min: usize) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/corpus")
        .join(target);
    let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let mut paths: Vec<std::path::PathBuf> = entries
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .filter(|path| path.is_file())
        .collect();
    paths.sort();
    assert!(
        paths.len() >= min,
        "only {} seeds in {}",
        paths.len(),
        dir.display()
    );
    paths
        .into_iter()
        .map(|path| {
            let data = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            (path, data)
        })
        .collect()
}

/// Run every seed of `target` (at least `min`) through `body`; a failure
/// names the seed (the default panic hook has already printed why).
pub fn run_corpus(target: &str, min: usize, body: impl Fn(&[u8]) + std::panic::RefUnwindSafe) {
    for (path, data) in corpus(target, min) {
        let outcome = std::panic::catch_unwind(|| body(&data));
        assert!(outcome.is_ok(), "fuzz checks failed on {}", path.display());
    }
}
