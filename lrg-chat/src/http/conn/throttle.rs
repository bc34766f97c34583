//! Throttling of repeated 403s per peer: a token bucket per address.
//!
//! Every 403 an address is answered costs one token; a full bucket holds
//! [`ServeOptions::forbidden_burst`](super::ServeOptions::forbidden_burst)
//! and one token comes back every
//! [`ServeOptions::forbidden_refill`](super::ServeOptions::forbidden_refill).
//! While an address has no token left, its requests are answered 429 before
//! they reach the router, so guessing tokens costs time. IPv6 peers are
//! counted per /64 (what one host is usually given). The map is bounded:
//! when full, buckets that have refilled (as good as absent) are dropped,
//! then the least recently charged.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Addresses tracked at most.
const MAX_PEERS: usize = 4096;

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    updated: Instant,
}

/// Token buckets of 403s, per peer.
#[derive(Debug)]
pub(super) struct Throttle {
    burst: f64,
    refill: Duration,
    buckets: Mutex<HashMap<IpAddr, Bucket>>,
}

impl Throttle {
    pub(super) fn new(burst: u32, refill: Duration) -> Self {
        Self {
            burst: f64::from(burst),
            refill: refill.max(Duration::from_millis(1)),
            buckets: Mutex::new(HashMap::new()),
        }
    }

    fn enabled(&self) -> bool {
        self.burst > 0.0
    }

    fn refilled(&self, bucket: Bucket, now: Instant) -> f64 {
        let elapsed = now.saturating_duration_since(bucket.updated);
        (bucket.tokens + elapsed.as_secs_f64() / self.refill.as_secs_f64()).min(self.burst)
    }

    /// `Some(wait)` while `peer` has no token left: how long until it has one.
    pub(super) fn blocked(&self, peer: IpAddr, now: Instant) -> Option<Duration> {
        if !self.enabled() {
            return None;
        }
        let buckets = lrg_providers::sync::lock(&self.buckets);
        let bucket = *buckets.get(&key(peer))?;
        let tokens = self.refilled(bucket, now);
        (tokens < 1.0).then(|| self.refill.mul_f64(1.0 - tokens))
    }

    /// `peer` was answered 403: take a token.
    pub(super) fn charge(&self, peer: IpAddr, now: Instant) {
        if !self.enabled() {
            return;
        }
        let key = key(peer);
        let mut buckets = lrg_providers::sync::lock(&self.buckets);
        if !buckets.contains_key(&key) && buckets.len() >= MAX_PEERS {
            buckets.retain(|_, b| self.refilled(*b, now) < self.burst);
            if buckets.len() >= MAX_PEERS
                && let Some(oldest) = buckets
                    .iter()
                    .min_by_key(|(_, b)| b.updated)
                    .map(|(k, _)| *k)
            {
                buckets.remove(&oldest);
            }
        }
        let tokens = buckets
            .get(&key)
            .map_or(self.burst, |b| self.refilled(*b, now));
        buckets.insert(
            key,
            Bucket {
                tokens: (tokens - 1.0).max(0.0),
                updated: now,
            },
        );
    }
}

/// The address a bucket is kept under: IPv4 as is (IPv4-mapped IPv6 too),
/// IPv6 by its /64.
fn key(peer: IpAddr) -> IpAddr {
    match peer {
        IpAddr::V4(v4) => IpAddr::V4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let s = v6.segments();
                IpAddr::V6(Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_of_twenty_then_one_per_refill() {
        let throttle = Throttle::new(20, Duration::from_secs(1));
        let peer: IpAddr = "192.0.2.1".parse().unwrap_or(IpAddr::V4([0; 4].into()));
        let t0 = Instant::now();
        for _ in 0..20 {
            assert_eq!(throttle.blocked(peer, t0), None);
            throttle.charge(peer, t0);
        }
        let wait = throttle.blocked(peer, t0);
        assert_eq!(wait, Some(Duration::from_secs(1)));
        // Another address is not affected.
        let other: IpAddr = "192.0.2.2".parse().unwrap_or(IpAddr::V4([0; 4].into()));
        assert_eq!(throttle.blocked(other, t0), None);
        // A second later one more 403 is allowed, then blocked again.
        let t1 = t0 + Duration::from_secs(1);
        assert_eq!(throttle.blocked(peer, t1), None);
        throttle.charge(peer, t1);
        assert!(throttle.blocked(peer, t1).is_some());
    }

    #[test]
    fn ipv6_is_counted_per_64_and_the_map_stays_bounded() {
        let throttle = Throttle::new(1, Duration::from_secs(3600));
        let now = Instant::now();
        let a: IpAddr = "2001:db8:1:2::1"
            .parse()
            .unwrap_or(IpAddr::V4([0; 4].into()));
        let b: IpAddr = "2001:db8:1:2::ffff"
            .parse()
            .unwrap_or(IpAddr::V4([0; 4].into()));
        throttle.charge(a, now);
        assert!(throttle.blocked(b, now).is_some());
        for i in 0..(MAX_PEERS as u32 + 10) {
            throttle.charge(IpAddr::V4(i.into()), now);
        }
        let len = lrg_providers::sync::lock(&throttle.buckets).len();
        assert!(len <= MAX_PEERS, "{len}");
    }
}
