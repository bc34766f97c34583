//! Following a model list across pages, for the APIs that page it.

use std::future::Future;

use crate::ProviderError;

/// A server that keeps handing out "more" must not loop us forever.
const MAX_PAGES: usize = 50;

/// Fetch pages with `fetch(cursor)` (no cursor for the first page) until a
/// page gives no next cursor, gives the cursor it was fetched with again, or
/// [`MAX_PAGES`] pages have come; their items in order.
pub(crate) async fn follow_pages<T, F, Fut>(mut fetch: F) -> Result<Vec<T>, ProviderError>
where
    F: FnMut(Option<String>) -> Fut,
    Fut: Future<Output = Result<(Vec<T>, Option<String>), ProviderError>>,
{
    let mut items = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..MAX_PAGES {
        let (found, next) = fetch(cursor.clone()).await?;
        items.extend(found);
        match next {
            Some(next) if cursor.as_deref() != Some(next.as_str()) => cursor = Some(next),
            _ => return Ok(items),
        }
    }
    Ok(items)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn stops_at_the_end_at_a_repeated_cursor_and_at_the_cap() {
        let pages = follow_pages(|cursor| async move {
            Ok(match cursor.as_deref() {
                None => (vec![1], Some("a".to_string())),
                Some("a") => (vec![2], Some("b".to_string())),
                _ => (vec![3], None),
            })
        })
        .await
        .unwrap();
        assert_eq!(pages, vec![1, 2, 3]);

        let repeated = follow_pages(|_| async { Ok((vec![0], Some("same".to_string()))) })
            .await
            .unwrap();
        assert_eq!(repeated.len(), 2);

        let mut n = 0;
        let endless = follow_pages(|_| {
            n += 1;
            let next = n.to_string();
            async move { Ok((vec![()], Some(next))) }
        })
        .await
        .unwrap();
        assert_eq!(endless.len(), MAX_PAGES);
    }
}
