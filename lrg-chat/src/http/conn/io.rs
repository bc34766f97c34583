//! The socket as hyper sees it: notes what arrives (for the idle timeout)
//! and whether writes go through (for the write timeout), and gives hyper's
//! own protocol errors lrg's JSON body.
//!
//! hyper answers a request it cannot parse (a bad request line or header:
//! 400; a request target over its limit: 414; headers over
//! [`ServeOptions::max_header_bytes`](super::ServeOptions::max_header_bytes)
//! or more than 100 of them: 431) by itself, with an empty body, and offers
//! no hook to change that (hyperium/hyper#2583). Such an answer is always
//! written when no request of ours is in flight on the connection and after
//! bytes arrived since the last response, and it is exactly a status line of
//! those three, `content-length: 0`, a `date`, and nothing after the head.
//! Only a write meeting all of that is replaced, by the same status with
//! `{"error": {"kind", "message"}}` and `connection: close` (hyper closes
//! the connection after it anyway). A write that does not match goes through
//! untouched: this never parses requests.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::registry::ConnEntry;
use crate::http::ApiErrorKind;

/// A socket of one connection.
pub(super) struct Socket<T> {
    inner: T,
    entry: Arc<ConnEntry>,
    limits: ErrorLimits,
    /// A replacement answer not yet written out.
    pending: Vec<u8>,
    written: usize,
}

/// The limits the replaced answers name.
#[derive(Debug, Clone, Copy)]
pub(super) struct ErrorLimits {
    pub(super) header_bytes: usize,
}

impl<T> Socket<T> {
    pub(super) fn new(inner: T, entry: Arc<ConnEntry>, limits: ErrorLimits) -> Self {
        Self {
            inner,
            entry,
            limits,
            pending: Vec::new(),
            written: 0,
        }
    }
}

impl<T: AsyncWrite + Unpin> Socket<T> {
    /// Notes whether a write went through (for the write timeout).
    fn note<R>(&self, poll: Poll<io::Result<R>>) -> Poll<io::Result<R>> {
        match &poll {
            Poll::Pending => self.entry.write_blocked(),
            Poll::Ready(_) => self.entry.write_progressed(),
        }
        poll
    }

    /// Write out what is left of a replacement answer.
    fn drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.written < self.pending.len() {
            let poll = Pin::new(&mut self.inner).poll_write(cx, &self.pending[self.written..]);
            let n = ready!(self.note(poll))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.written += n;
        }
        Poll::Ready(Ok(()))
    }

    /// Whether a write now could be one of hyper's own answers.
    fn may_be_hypers(&self) -> bool {
        self.entry.is_idle() && self.entry.has_read_since_idle()
    }

    /// Takes `buf` in place of hyper's answer if it is one; true if it was.
    fn replace(&mut self, buf: &[u8], cx: &mut Context<'_>) -> io::Result<bool> {
        if !self.may_be_hypers() {
            return Ok(false);
        }
        let Some(replacement) = replacement(buf, self.limits) else {
            return Ok(false);
        };
        self.pending = replacement;
        self.written = 0;
        match self.drain(cx) {
            Poll::Ready(r) => r.map(|()| true),
            // Taken: hyper flushes next, and the flush writes the rest.
            Poll::Pending => Ok(true),
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Socket<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let result = ready!(Pin::new(&mut self.inner).poll_read(cx, buf));
        if buf.filled().len() > before {
            self.entry.bytes_read();
        }
        Poll::Ready(result)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Socket<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        ready!(this.drain(cx))?;
        if this.replace(buf, cx)? {
            return Poll::Ready(Ok(buf.len()));
        }
        let poll = Pin::new(&mut this.inner).poll_write(cx, buf);
        this.note(poll)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        ready!(this.drain(cx))?;
        if this.may_be_hypers() {
            // hyper's answer is a head alone: one slice.
            let mut filled = bufs.iter().filter(|b| !b.is_empty());
            if let (Some(only), None) = (filled.next(), filled.next())
                && this.replace(only, cx)?
            {
                return Poll::Ready(Ok(only.len()));
            }
        }
        let poll = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        this.note(poll)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.drain(cx))?;
        // Not noted: a socket's flush is ready even while its writes wait.
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.drain(cx))?;
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// The statuses hyper answers by itself, with lrg's kind and message.
fn known(buf: &[u8], limits: ErrorLimits) -> Option<(&'static str, ApiErrorKind, String)> {
    const ANSWERS: [(&str, ApiErrorKind); 3] = [
        ("400 Bad Request", ApiErrorKind::BadRequest),
        ("414 URI Too Long", ApiErrorKind::TooLarge),
        (
            "431 Request Header Fields Too Large",
            ApiErrorKind::TooLarge,
        ),
    ];
    let line = buf.strip_prefix(b"HTTP/1.1 ")?;
    let (status, kind) = ANSWERS.into_iter().find(|(status, _)| {
        line.starts_with(status.as_bytes()) && line[status.len()..].starts_with(b"\r\n")
    })?;
    let message = match &status[..3] {
        "400" => {
            "the request is not valid HTTP/1.1 (a malformed request line or header)".to_string()
        }
        "414" => "the request target (path and query) is too long".to_string(),
        _ => format!(
            "the request headers are too large: at most {} bytes and 100 headers",
            limits.header_bytes
        ),
    };
    Some((status, kind, message))
}

/// lrg's answer for `buf` if `buf` is exactly one of hyper's own.
fn replacement(buf: &[u8], limits: ErrorLimits) -> Option<Vec<u8>> {
    let (status, kind, message) = known(buf, limits)?;
    // A head alone, ending the write, with no body.
    let head_end = buf.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    if head_end != buf.len() {
        return None;
    }
    let head = &buf[..head_end];
    let has = |name: &[u8]| {
        head.windows(name.len())
            .any(|w| w.eq_ignore_ascii_case(name))
    };
    if !has(b"\r\ncontent-length: 0\r\n") {
        return None;
    }
    let date = find_line(head, b"\r\ndate: ");
    let body = super::error_json(kind, &message);
    let mut out = Vec::with_capacity(256 + body.len());
    out.extend_from_slice(b"HTTP/1.1 ");
    out.extend_from_slice(status.as_bytes());
    out.extend_from_slice(
        b"\r\ncontent-type: application/json\r\ncache-control: no-store\r\n\
          x-content-type-options: nosniff\r\nconnection: close\r\ncontent-length: ",
    );
    out.extend_from_slice(body.len().to_string().as_bytes());
    if let Some(date) = date {
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(date);
    }
    out.extend_from_slice(b"\r\n\r\n");
    out.extend_from_slice(body.as_bytes());
    Some(out)
}

/// The header line starting with `prefix` (`\r\nname: `), without its CRLFs.
fn find_line<'a>(head: &'a [u8], prefix: &[u8]) -> Option<&'a [u8]> {
    let start = head
        .windows(prefix.len())
        .position(|w| w.eq_ignore_ascii_case(prefix))?
        + 2;
    let len = head[start..].windows(2).position(|w| w == b"\r\n")?;
    Some(&head[start..start + len])
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: ErrorLimits = ErrorLimits {
        header_bytes: 16384,
    };

    #[test]
    fn hypers_answers_become_json() {
        let hyper = b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\ndate: Tue, 01 Dec 2026 20:00:00 GMT\r\n\r\n";
        let out = replacement(hyper, LIMITS).unwrap_or_default();
        let text = String::from_utf8_lossy(&out);
        assert!(
            text.starts_with("HTTP/1.1 431 Request Header Fields Too Large\r\n"),
            "{text}"
        );
        assert!(
            text.contains("\r\ndate: Tue, 01 Dec 2026 20:00:00 GMT\r\n"),
            "{text}"
        );
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or_default();
        assert!(
            head.contains(&format!("content-length: {}", body.len())),
            "{text}"
        );
        let json: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
        assert_eq!(json["error"]["kind"], "too_large");
        assert!(
            json["error"]["message"]
                .as_str()
                .unwrap_or("")
                .contains("16384")
        );
    }

    #[test]
    fn anything_else_goes_through() {
        for buf in [
            &b"HTTP/1.1 400 Bad Request\r\ncontent-length: 2\r\n\r\n{}"[..],
            b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\n\r\n",
            b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n",
            b"HTTP/1.1 400 Bad Requests\r\ncontent-length: 0\r\n\r\n",
            b"0\r\n\r\n",
            b"",
        ] {
            assert!(
                replacement(buf, LIMITS).is_none(),
                "{}",
                String::from_utf8_lossy(buf)
            );
        }
    }
}
