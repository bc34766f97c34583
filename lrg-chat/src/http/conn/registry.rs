//! The open connections of one server, and which one goes first when the
//! cap is reached.
//!
//! Each connection has an entry: whether a request is in flight (from the
//! moment its head was read until its response body ended), whether that
//! request's body is still arriving, whether bytes arrived since the last
//! response, since when it has been without a request, and since when its
//! client has not read what is written to it. When the server is full, the
//! connection to close is the one that has waited longest without a request
//! (slow or idle); only when there is none, the oldest one whose request
//! body is still trickling in or whose client stopped reading. A connection
//! with a complete request in flight that its client reads, which includes
//! every open event stream, is never closed to make room.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

const NOT_STALLED: u64 = u64::MAX;

/// One open connection, as the accept loop and its own task see it.
#[derive(Debug)]
pub(super) struct ConnEntry {
    id: u64,
    epoch: Instant,
    in_flight: AtomicUsize,
    body_pending: AtomicBool,
    read_since_idle: AtomicBool,
    /// Milliseconds after `epoch` since which no request is in flight.
    idle_since_ms: AtomicU64,
    /// Milliseconds after `epoch` since which a write waits for the client
    /// to read; [`NOT_STALLED`] while writes go through.
    stalled_since_ms: AtomicU64,
    close: CancellationToken,
}

impl ConnEntry {
    fn now_ms(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// A request's head was read: it is in flight until [`Self::request_done`].
    pub(super) fn request_started(&self, body_pending: bool) {
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        self.body_pending.store(body_pending, Ordering::Release);
    }

    /// The request's body has all arrived (or will not be read any more).
    pub(super) fn body_done(&self) {
        self.body_pending.store(false, Ordering::Release);
    }

    /// Whether the request in flight is still waiting for its body.
    pub(super) fn body_is_pending(&self) -> bool {
        self.body_pending.load(Ordering::Acquire)
    }

    /// A response ended (its body was finished or dropped).
    pub(super) fn request_done(&self) {
        if self.in_flight.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.body_pending.store(false, Ordering::Release);
            self.read_since_idle.store(false, Ordering::Release);
            self.idle_since_ms.store(self.now_ms(), Ordering::Release);
        }
    }

    /// A write could not go through: the client is not reading.
    pub(super) fn write_blocked(&self) {
        let now = self.now_ms();
        let _ = self.stalled_since_ms.compare_exchange(
            NOT_STALLED,
            now,
            Ordering::AcqRel,
            Ordering::Acquire,
        );
    }

    /// A write went through.
    pub(super) fn write_progressed(&self) {
        self.stalled_since_ms.store(NOT_STALLED, Ordering::Release);
    }

    fn is_stalled(&self) -> bool {
        self.stalled_since_ms.load(Ordering::Acquire) != NOT_STALLED
    }

    /// When a connection whose client stopped reading is to be closed.
    pub(super) fn stall_deadline(&self, write_timeout: Duration) -> Option<Instant> {
        let since = self.stalled_since_ms.load(Ordering::Acquire);
        (since != NOT_STALLED).then(|| self.epoch + Duration::from_millis(since) + write_timeout)
    }

    /// Bytes arrived from the client.
    pub(super) fn bytes_read(&self) {
        self.read_since_idle.store(true, Ordering::Release);
    }

    /// Whether no request is in flight.
    pub(super) fn is_idle(&self) -> bool {
        self.in_flight.load(Ordering::Acquire) == 0
    }

    /// Whether bytes arrived since the last response ended (or since the
    /// connection was accepted).
    pub(super) fn has_read_since_idle(&self) -> bool {
        self.read_since_idle.load(Ordering::Acquire)
    }

    /// When a connection with no request in flight and nothing received
    /// since its last response is to be closed; `None` while a request is
    /// in flight or a request's head is arriving (the header-read timeout
    /// governs that).
    pub(super) fn idle_deadline(&self, idle_timeout: Duration) -> Option<Instant> {
        if !self.is_idle() || self.has_read_since_idle() {
            return None;
        }
        let since = Duration::from_millis(self.idle_since_ms.load(Ordering::Acquire));
        Some(self.epoch + since + idle_timeout)
    }

    /// Resolves when the connection is to be dropped (evicted, idle too
    /// long, or the server stops without waiting longer).
    pub(super) async fn closed(&self) {
        self.close.cancelled().await;
    }

    /// Ask the connection's task to drop it.
    pub(super) fn close(&self) {
        self.close.cancel();
    }
}

/// Why [`Registry::evict_one`] did or did not close a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Eviction {
    /// A connection was told to close.
    Evicted,
    /// One told earlier has not closed yet: wait for it.
    Pending,
    /// Every connection has a complete request in flight.
    NoneEvictable,
}

#[derive(Debug, Default)]
struct Inner {
    conns: HashMap<u64, Arc<ConnEntry>>,
    next_id: u64,
}

/// The open connections of one server.
#[derive(Debug)]
pub(super) struct Registry {
    inner: Mutex<Inner>,
    epoch: Instant,
    freed: Notify,
}

impl Registry {
    pub(super) fn new() -> Self {
        Self {
            inner: Mutex::new(Inner::default()),
            epoch: Instant::now(),
            freed: Notify::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // The map stays consistent across a panic elsewhere: every change is
        // one insert or one remove.
        lrg_providers::sync::lock(&self.inner)
    }

    /// Connections open now (including any told to close that have not yet).
    pub(super) fn len(&self) -> usize {
        self.lock().conns.len()
    }

    /// A new connection, idle since now.
    pub(super) fn insert(&self) -> Arc<ConnEntry> {
        let mut inner = self.lock();
        let id = inner.next_id;
        inner.next_id += 1;
        let entry = Arc::new(ConnEntry {
            id,
            epoch: self.epoch,
            in_flight: AtomicUsize::new(0),
            body_pending: AtomicBool::new(false),
            read_since_idle: AtomicBool::new(false),
            idle_since_ms: AtomicU64::new(0),
            stalled_since_ms: AtomicU64::new(NOT_STALLED),
            close: CancellationToken::new(),
        });
        entry.idle_since_ms.store(entry.now_ms(), Ordering::Release);
        inner.conns.insert(id, entry.clone());
        entry
    }

    /// The connection has closed.
    pub(super) fn remove(&self, entry: &ConnEntry) {
        self.lock().conns.remove(&entry.id);
        self.freed.notify_one();
    }

    /// Resolves after a connection closed (or at once if one closed since
    /// the last wait).
    pub(super) async fn freed(&self) {
        self.freed.notified().await;
    }

    /// Close the connection that has waited longest without a request;
    /// failing that, the oldest whose request body is still arriving or
    /// whose client stopped reading its answer.
    pub(super) fn evict_one(&self) -> Eviction {
        let inner = self.lock();
        // Ordered by (idle since, id): connections accepted within the same
        // millisecond go oldest first, never in the map's random order (which
        // could close the newest, still waiting for its first request).
        let mut idle: Option<((u64, u64), &Arc<ConnEntry>)> = None;
        let mut trickling: Option<((u64, u64), &Arc<ConnEntry>)> = None;
        for entry in inner.conns.values() {
            if entry.close.is_cancelled() {
                return Eviction::Pending;
            }
            let since = (entry.idle_since_ms.load(Ordering::Acquire), entry.id);
            let slot = if entry.is_idle() {
                &mut idle
            } else if entry.body_pending.load(Ordering::Acquire) || entry.is_stalled() {
                &mut trickling
            } else {
                continue;
            };
            if slot.is_none_or(|(best, _)| since < best) {
                *slot = Some((since, entry));
            }
        }
        match idle.or(trickling) {
            Some((_, entry)) => {
                entry.close();
                Eviction::Evicted
            }
            None => Eviction::NoneEvictable,
        }
    }

    /// Tell every connection to close now.
    pub(super) fn close_all(&self) {
        for entry in self.lock().conns.values() {
            entry.close();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_idle_goes_first_and_streams_never() {
        let registry = Registry::new();
        let stream = registry.insert();
        stream.request_started(false);
        std::thread::sleep(Duration::from_millis(5));
        let old_idle = registry.insert();
        std::thread::sleep(Duration::from_millis(5));
        let new_idle = registry.insert();

        assert_eq!(registry.evict_one(), Eviction::Evicted);
        assert!(old_idle.close.is_cancelled());
        assert!(!new_idle.close.is_cancelled());
        // Not closed yet: no second eviction until it is gone.
        assert_eq!(registry.evict_one(), Eviction::Pending);
        registry.remove(&old_idle);
        assert_eq!(registry.evict_one(), Eviction::Evicted);
        assert!(new_idle.close.is_cancelled());
        registry.remove(&new_idle);
        assert_eq!(registry.evict_one(), Eviction::NoneEvictable);
        assert!(!stream.close.is_cancelled());
    }

    #[test]
    fn a_trickling_body_goes_only_when_nothing_is_idle() {
        let registry = Registry::new();
        let upload = registry.insert();
        upload.request_started(true);
        let idle = registry.insert();
        assert_eq!(registry.evict_one(), Eviction::Evicted);
        assert!(idle.close.is_cancelled());
        registry.remove(&idle);
        assert_eq!(registry.evict_one(), Eviction::Evicted);
        assert!(upload.close.is_cancelled());
    }

    #[test]
    fn a_client_that_stops_reading_can_be_evicted() {
        let registry = Registry::new();
        let stuck = registry.insert();
        stuck.request_started(false);
        assert_eq!(registry.evict_one(), Eviction::NoneEvictable);
        stuck.write_blocked();
        assert!(stuck.stall_deadline(Duration::from_secs(1)).is_some());
        assert_eq!(registry.evict_one(), Eviction::Evicted);
        stuck.write_progressed();
        assert!(stuck.stall_deadline(Duration::from_secs(1)).is_none());
    }

    #[test]
    fn idle_deadline_waits_for_the_response_and_ignores_a_head_in_progress() {
        let registry = Registry::new();
        let conn = registry.insert();
        let timeout = Duration::from_secs(5);
        assert!(conn.idle_deadline(timeout).is_some());
        conn.bytes_read();
        assert!(conn.idle_deadline(timeout).is_none());
        conn.request_started(false);
        assert!(conn.idle_deadline(timeout).is_none());
        conn.request_done();
        assert!(conn.idle_deadline(timeout).is_some());
    }
}
