//! The stdio transport of a child-process server, with a cap on the size of
//! one message that answers at once when a server goes over it.
//!
//! rmcp's own stdio transport drops a line over its limit (16 MiB) and says
//! nothing to the caller, so a 20 MB tool result waited out the whole call
//! timeout and was reported as a timeout, though the server had answered.
//! Here the server's stdout is read through [`CappedLines`]: a line within
//! the cap passes unchanged; a line over it is counted and dropped as it
//! arrives (never held whole), and when it is a response, an error response
//! with the same id takes its place. The call then fails at once with an
//! error naming the size ([`OVERSIZED`]).

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use lrg_providers::Part;
use process_wrap::tokio::ChildWrapper;
use rmcp::RoleClient;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::transport::async_rw::AsyncRwTransport;
use tokio::io::{AsyncRead, ReadBuf};
use tokio::process::{ChildStderr, ChildStdin, ChildStdout};

use super::ToolOutput;

/// The JSON-RPC error code of a message dropped for its size (in the range
/// JSON-RPC leaves to implementations).
pub(crate) const OVERSIZED: i32 = -32_070;

/// How long a closed server gets to exit before it is killed.
const EXIT_WAIT: Duration = Duration::from_secs(3);

/// Bytes read from the child at a time.
const CHUNK: usize = 64 * 1024;

/// `n` bytes for a person: `20.0 MiB`, `512 KiB`, `300 bytes`.
pub(crate) fn size(n: u64) -> String {
    const KIB: u64 = 1024;
    const MIB: u64 = 1024 * 1024;
    if n >= MIB {
        let mib = n as f64 / MIB as f64;
        if n.is_multiple_of(MIB) {
            format!("{} MiB", n / MIB)
        } else {
            format!("{mib:.1} MiB")
        }
    } else if n >= KIB {
        format!("{} KiB", n / KIB)
    } else {
        format!("{n} bytes")
    }
}

/// Bytes of text and image data in `out`, as held in memory.
fn result_bytes(out: &ToolOutput) -> u64 {
    out.parts
        .iter()
        .map(|p| match p {
            Part::Text { text } | Part::Reasoning { text } => text.len() as u64,
            Part::Image(image) => image.data.len() as u64,
            _ => 0,
        })
        .sum()
}

/// `out`, or an error result in its place when it is over `cap` bytes.
pub(crate) fn capped(tool: &str, out: ToolOutput, cap: usize) -> ToolOutput {
    let bytes = result_bytes(&out);
    if bytes <= cap as u64 {
        return out;
    }
    let mut error = ToolOutput::error(oversized_message(tool, bytes, cap));
    error.warning = out.warning;
    error
}

/// What the model and the person are told of a result over the cap.
pub(crate) fn oversized_message(tool: &str, bytes: u64, cap: usize) -> String {
    format!(
        "The result of `{tool}` was {}, over the {} cap for a tool result, and was dropped; \
         ask for less (a narrower query, a page of it).",
        size(bytes),
        size(cap as u64)
    )
}

/// A child-process MCP server's transport: [`CappedLines`] over its stdout,
/// its stdin, and the process, killed (with its group) when dropped.
pub(crate) struct CappedChild {
    child: Option<Box<dyn ChildWrapper>>,
    transport: AsyncRwTransport<RoleClient, CappedLines<ChildStdout>, ChildStdin>,
}

impl CappedChild {
    /// Wrap a started child, taking its pipes; stderr is handed back.
    pub(crate) fn new(
        mut child: Box<dyn ChildWrapper>,
        cap: usize,
    ) -> std::io::Result<(Self, Option<ChildStderr>)> {
        let inner = child.inner_mut();
        let (Some(stdin), Some(stdout)) = (inner.stdin().take(), inner.stdout().take()) else {
            return Err(std::io::Error::other("the server's pipes were not set up"));
        };
        let stderr = inner.stderr().take();
        // Every line reaching rmcp is within the cap already (or is the
        // short error put in place of one that was not).
        let transport = AsyncRwTransport::new_client(CappedLines::new(stdout, cap), stdin)
            .with_max_line_length(usize::MAX);
        Ok((
            Self {
                child: Some(child),
                transport,
            },
            stderr,
        ))
    }
}

impl Drop for CappedChild {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // Kill and reap off the caller's path; `KillOnDrop` and the
            // process group make sure of the rest if no runtime is left.
            let _ = child.start_kill();
            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                rt.spawn(async move {
                    let _ = child.wait().await;
                });
            }
        }
    }
}

impl Transport<RoleClient> for CappedChild {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.transport.send(item)
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleClient>>> + Send {
        self.transport.receive()
    }

    /// The MCP spec's stdio shutdown: close its stdin, wait, then SIGTERM,
    /// wait, then kill.
    async fn close(&mut self) -> Result<(), Self::Error> {
        self.transport.close().await?;
        let Some(child) = self.child.as_mut() else {
            return Ok(());
        };
        if tokio::time::timeout(EXIT_WAIT, child.wait()).await.is_ok() {
            self.child = None;
            return Ok(());
        }
        #[cfg(unix)]
        if child.signal(libc::SIGTERM).is_ok()
            && tokio::time::timeout(EXIT_WAIT, child.wait()).await.is_ok()
        {
            self.child = None;
            return Ok(());
        }
        let killed = Box::into_pin(child.kill()).await;
        self.child = None;
        killed
    }
}

/// Reads newline-framed JSON-RPC messages, passing each on whole when it is
/// within `cap` bytes, and putting an error response in place of one that is
/// not (see the module docs).
pub(crate) struct CappedLines<R> {
    inner: R,
    cap: usize,
    /// The line read so far (at most `cap` bytes).
    line: Vec<u8>,
    /// Bytes ready for the reader, and how many of them it took.
    ready: Vec<u8>,
    taken: usize,
    /// Set while dropping a line over the cap.
    over: Option<Oversized>,
    chunk: Box<[u8]>,
}

/// What is known of a line being dropped.
struct Oversized {
    bytes: u64,
    scan: TopLevel,
}

impl<R> CappedLines<R> {
    pub(crate) fn new(inner: R, cap: usize) -> Self {
        Self {
            inner,
            cap,
            line: Vec::new(),
            ready: Vec::new(),
            taken: 0,
            over: None,
            chunk: vec![0; CHUNK].into_boxed_slice(),
        }
    }

    /// Take in `data` read from the child.
    fn push(&mut self, mut data: &[u8]) {
        while !data.is_empty() {
            let newline = data.iter().position(|b| *b == b'\n');
            let (part, rest) = match newline {
                Some(i) => (&data[..i], &data[i + 1..]),
                None => (data, &[][..]),
            };
            match &mut self.over {
                Some(over) => {
                    over.bytes += part.len() as u64;
                    over.scan.feed(part);
                }
                None if self.line.len() + part.len() > self.cap => {
                    let mut scan = TopLevel::default();
                    scan.feed(&self.line);
                    scan.feed(part);
                    self.over = Some(Oversized {
                        bytes: (self.line.len() + part.len()) as u64,
                        scan,
                    });
                    // Its memory is given back now, not when the line ends.
                    self.line = Vec::new();
                }
                None => self.line.extend_from_slice(part),
            }
            if newline.is_some() {
                self.end_line();
            }
            data = rest;
        }
    }

    /// A newline: pass the line on, or what stands in for a dropped one.
    fn end_line(&mut self) {
        match self.over.take() {
            None => {
                self.ready.append(&mut self.line);
                self.ready.push(b'\n');
            }
            Some(over) => {
                let cap = self.cap as u64;
                match over.scan.id() {
                    Some(id) if over.scan.is_response() => {
                        tracing::warn!(
                            bytes = over.bytes,
                            cap,
                            "a tool server's answer was over the size cap; replaced by an error"
                        );
                        let message = format!(
                            "the answer was {}, over the {} cap",
                            size(over.bytes),
                            size(cap)
                        );
                        let error = serde_json::json!({
                            "jsonrpc": "2.0",
                            "id": id,
                            "error": {
                                "code": OVERSIZED,
                                "message": message,
                                "data": {"bytes": over.bytes, "cap": cap},
                            },
                        });
                        self.ready.extend_from_slice(error.to_string().as_bytes());
                        self.ready.push(b'\n');
                    }
                    // A request or notification from the server, or a line
                    // with no id: nobody waits for it by id, so it is only
                    // dropped (and said so).
                    _ => tracing::warn!(
                        bytes = over.bytes,
                        cap,
                        "dropped a message from a tool server over the size cap"
                    ),
                }
            }
        }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for CappedLines<R> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        loop {
            if this.taken < this.ready.len() {
                let n = (this.ready.len() - this.taken).min(buf.remaining());
                buf.put_slice(&this.ready[this.taken..this.taken + n]);
                this.taken += n;
                if this.taken == this.ready.len() {
                    this.ready.clear();
                    this.taken = 0;
                }
                return Poll::Ready(Ok(()));
            }
            let mut read = ReadBuf::new(&mut this.chunk);
            match Pin::new(&mut this.inner).poll_read(cx, &mut read) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Ready(Ok(())) => {
                    let n = read.filled().len();
                    if n == 0 {
                        // The end: an unfinished line is passed as it is
                        // (rmcp ignores a last line without a newline).
                        if !this.line.is_empty() {
                            this.ready.append(&mut this.line);
                            continue;
                        }
                        return Poll::Ready(Ok(()));
                    }
                    let chunk = std::mem::take(&mut this.chunk);
                    this.push(&chunk[..n]);
                    this.chunk = chunk;
                }
            }
        }
    }
}

/// Follows a JSON object's top level byte by byte, without keeping it:
/// which keys it has and the text of its `"id"` value.
#[derive(Default)]
struct TopLevel {
    depth: u32,
    in_string: bool,
    escaped: bool,
    /// The key being read (top level only; short keys only).
    key: Option<Vec<u8>>,
    /// The last complete top-level key, until its value starts.
    last_key: Vec<u8>,
    /// Expecting a key (after `{` or `,` at the top level).
    want_key: bool,
    /// Reading the value of `"id"`.
    id: Option<Vec<u8>>,
    id_done: bool,
    has_method: bool,
    has_result_or_error: bool,
}

/// Longest key or id kept; the ones that matter are short.
const MAX_TOKEN: usize = 256;

impl TopLevel {
    fn feed(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.byte(b);
        }
    }

    fn byte(&mut self, b: u8) {
        let reading_id = self.id.is_some() && !self.id_done;
        if reading_id {
            let ends = !self.in_string && self.depth == 1 && (b == b',' || b == b'}');
            if ends {
                self.id_done = true;
            } else if let Some(id) = &mut self.id
                && id.len() < MAX_TOKEN
            {
                id.push(b);
            }
        }
        if self.in_string {
            if self.escaped {
                self.escaped = false;
            } else if b == b'\\' {
                self.escaped = true;
            } else if b == b'"' {
                self.in_string = false;
                if let Some(key) = self.key.take() {
                    self.last_key = key;
                }
                return;
            }
            if let Some(key) = &mut self.key
                && key.len() < MAX_TOKEN
            {
                key.push(b);
            }
            return;
        }
        match b {
            b'"' => {
                self.in_string = true;
                if self.depth == 1 && self.want_key {
                    self.key = Some(Vec::new());
                    self.want_key = false;
                }
            }
            b'{' | b'[' => {
                self.depth += 1;
                if self.depth == 1 {
                    self.want_key = b == b'{';
                }
            }
            b'}' | b']' => self.depth = self.depth.saturating_sub(1),
            b',' if self.depth == 1 => self.want_key = true,
            b':' if self.depth == 1 => {
                match self.last_key.as_slice() {
                    b"id" if self.id.is_none() => self.id = Some(Vec::new()),
                    b"method" => self.has_method = true,
                    b"result" | b"error" => self.has_result_or_error = true,
                    _ => {}
                }
                self.last_key.clear();
            }
            _ => {}
        }
    }

    /// The `"id"` value, when it was read whole and is a number or a string.
    fn id(&self) -> Option<serde_json::Value> {
        if !self.id_done {
            return None;
        }
        let text = std::str::from_utf8(self.id.as_deref()?).ok()?.trim();
        match serde_json::from_str::<serde_json::Value>(text).ok()? {
            v @ (serde_json::Value::Number(_) | serde_json::Value::String(_)) => Some(v),
            _ => None,
        }
    }

    /// Whether the message answers a request (a result or an error, no method).
    fn is_response(&self) -> bool {
        self.has_result_or_error && !self.has_method
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::AsyncReadExt as _;

    use super::*;

    async fn through(cap: usize, input: &[u8]) -> String {
        let mut reader = CappedLines::new(input, cap);
        let mut out = Vec::new();
        reader.read_to_end(&mut out).await.unwrap();
        String::from_utf8(out).unwrap()
    }

    #[tokio::test]
    async fn lines_within_the_cap_pass_unchanged() {
        let input = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n{\"a\":1}\npartial";
        assert_eq!(through(64, input).await.as_bytes(), input);
    }

    #[tokio::test]
    async fn an_oversized_response_becomes_an_error_with_its_id() {
        let big = "x".repeat(1000);
        for line in [
            format!(
                r#"{{"jsonrpc":"2.0","id":7,"result":{{"content":[{{"type":"text","text":"{big}"}}]}}}}"#
            ),
            // The TypeScript SDK writes the id last.
            format!(r#"{{"result":{{"text":"{big}","id":1}},"jsonrpc":"2.0","id":"s-7"}}"#),
        ] {
            let input = format!("{line}\n{{\"after\":true}}\n");
            let out = through(100, input.as_bytes()).await;
            let mut lines = out.lines();
            let error: serde_json::Value = serde_json::from_str(lines.next().unwrap()).unwrap();
            assert!(error["id"] == 7 || error["id"] == "s-7", "{error}");
            assert_eq!(error["error"]["code"], OVERSIZED);
            let message = error["error"]["message"].as_str().unwrap();
            assert!(message.contains("over the 100 bytes cap"), "{message}");
            assert_eq!(lines.next(), Some("{\"after\":true}"));
        }
    }

    #[tokio::test]
    async fn an_oversized_request_or_notification_is_only_dropped() {
        let big = "x".repeat(1000);
        let input = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"sampling/createMessage\",\"params\":\"{big}\"}}\n\
             {{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":\"{big}\"}}\n\
             {{\"ok\":1}}\n"
        );
        assert_eq!(through(100, input.as_bytes()).await, "{\"ok\":1}\n");
    }

    #[test]
    fn an_id_inside_the_result_is_not_the_messages() {
        let mut scan = TopLevel::default();
        scan.feed(br#"{"jsonrpc":"2.0","result":{"id":99,"s":"\"id\":5,"},"id":12}"#);
        assert_eq!(scan.id(), Some(serde_json::json!(12)));
        assert!(scan.is_response());
    }

    #[test]
    fn sizes_read_as_a_person_would() {
        assert_eq!(size(8 * 1024 * 1024), "8 MiB");
        assert_eq!(size(20_000_000), "19.1 MiB");
        assert_eq!(size(2048), "2 KiB");
        assert_eq!(size(12), "12 bytes");
    }
}
