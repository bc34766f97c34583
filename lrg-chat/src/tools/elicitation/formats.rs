//! The string formats a form field may ask for, checked as the spec's
//! JSON Schema subset means them: `email`, `uri`, `date` (RFC 3339
//! full-date, a real calendar day) and `date-time` (RFC 3339).

use super::TextFormat;

pub(super) fn format_ok(format: TextFormat, s: &str) -> bool {
    match format {
        TextFormat::Email => email_ok(s),
        TextFormat::Uri => uri_ok(s),
        TextFormat::Date => date_ok(s),
        TextFormat::DateTime => date_time_ok(s),
    }
}

fn email_ok(s: &str) -> bool {
    let Some((local, domain)) = s.rsplit_once('@') else {
        return false;
    };
    !local.is_empty()
        && !s.chars().any(char::is_whitespace)
        && domain.contains('.')
        && !domain.starts_with('.')
        && !domain.ends_with('.')
        && !domain.contains('@')
}

fn uri_ok(s: &str) -> bool {
    let Some((scheme, rest)) = s.split_once(':') else {
        return false;
    };
    let mut chars = scheme.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
        && !rest.is_empty()
        && !s.chars().any(|c| c.is_whitespace() || c.is_control())
}

fn digits(s: &str, n: usize) -> Option<u32> {
    (s.len() == n && s.bytes().all(|b| b.is_ascii_digit()))
        .then(|| s.parse().ok())
        .flatten()
}

fn date_ok(s: &str) -> bool {
    let mut parts = s.split('-');
    let (Some(y), Some(m), Some(d), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return false;
    };
    let (Some(y), Some(m), Some(d)) = (digits(y, 4), digits(m, 2), digits(d, 2)) else {
        return false;
    };
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let days = match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return false,
    };
    (1..=days).contains(&d)
}

fn date_time_ok(s: &str) -> bool {
    let Some((date, time)) = s.split_once(['T', 't']) else {
        return false;
    };
    if !date_ok(date) {
        return false;
    }
    let (clock, zone) = if let Some(clock) = time.strip_suffix(['Z', 'z']) {
        (clock, None)
    } else if let Some(i) = time.rfind(['+', '-']) {
        (&time[..i], Some(&time[i + 1..]))
    } else {
        return false;
    };
    let clock = clock.split_once('.').map_or(clock, |(whole, frac)| {
        if !frac.is_empty() && frac.bytes().all(|b| b.is_ascii_digit()) {
            whole
        } else {
            ""
        }
    });
    let hms: Vec<&str> = clock.split(':').collect();
    let clock_ok = matches!(hms.as_slice(), [h, m, s]
        if digits(h, 2).is_some_and(|h| h < 24)
            && digits(m, 2).is_some_and(|m| m < 60)
            && digits(s, 2).is_some_and(|s| s <= 60));
    let zone_ok = zone.is_none_or(|z| {
        matches!(z.split_once(':'), Some((h, m))
            if digits(h, 2).is_some_and(|h| h < 24) && digits(m, 2).is_some_and(|m| m < 60))
    });
    clock_ok && zone_ok
}
