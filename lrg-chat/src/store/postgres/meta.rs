//! The meta of a [`PgStore`]'s sessions: reading it back for damage, and
//! changing it (archiving, moving to another model) in one transaction with
//! the row locked, the `archived` column kept in step with the JSON.

use tokio_postgres::Client;

use super::{
    DamagedSession, FORMAT_VERSION, PgStore, SessionId, SessionKeys, SessionMeta, StoreError, db,
    json_err, place,
};

impl PgStore {
    /// The damaged sessions, all or those holding `keys` (an archived one
    /// holds none).
    pub(super) async fn damaged_with(
        &self,
        keys: Option<&SessionKeys>,
    ) -> Result<Vec<DamagedSession>, StoreError> {
        let client = self.client().await?;
        let (client_key, context_key) = match keys {
            Some(k) => (
                Some(k.client().as_str().to_string()),
                Some(k.context().as_str().to_string()),
            ),
            None => (None, None),
        };
        let rows = client
            .query(
                "SELECT id, client_key, context_key, version, meta FROM lrg_sessions \
                 WHERE ($1::TEXT IS NULL OR client_key = $1) \
                   AND ($2::TEXT IS NULL OR context_key = $2) \
                   AND ($1::TEXT IS NULL OR NOT archived)",
                &[&client_key, &context_key],
            )
            .await
            .map_err(db)?;
        let mut out = Vec::new();
        for row in rows {
            let id: &str = row.get(0);
            let Ok(id) = id.parse::<SessionId>() else {
                continue;
            };
            let version: i32 = row.get(3);
            let error = if version > FORMAT_VERSION as i32 {
                StoreError::FutureVersion {
                    file: place(&id),
                    found: u32::try_from(version).unwrap_or(u32::MAX),
                }
            } else {
                match serde_json::from_str::<SessionMeta>(row.get::<_, &str>(4)) {
                    Ok(_) => continue,
                    Err(e) => StoreError::Corrupt {
                        file: place(&id),
                        line: 0,
                        reason: format!("unreadable meta ({e})"),
                    },
                }
            };
            let keys = match (row.get::<_, Option<&str>>(1), row.get::<_, Option<&str>>(2)) {
                (Some(c), Some(x)) => SessionKeys::new(c, x).ok(),
                _ => None,
            };
            tracing::error!("a damaged session, left as it is: {error}");
            out.push(DamagedSession {
                file: place(&id),
                id: Some(id),
                keys,
                error,
            });
        }
        Ok(out)
    }
}

/// Change the meta of session `id` with `change`, in one transaction with
/// its row locked; the meta as it is now, or `None` when there is no such
/// session. Nothing is written when `change` leaves it as it was.
pub(super) async fn update_meta(
    client: &mut Client,
    id: &SessionId,
    change: impl FnOnce(&mut SessionMeta),
) -> Result<Option<SessionMeta>, StoreError> {
    let tx = client.transaction().await.map_err(db)?;
    let Some(row) = tx
        .query_opt(
            "SELECT version, meta FROM lrg_sessions WHERE id = $1 FOR UPDATE",
            &[&id.as_str()],
        )
        .await
        .map_err(db)?
    else {
        return Ok(None);
    };
    let version: i32 = row.get(0);
    if version > FORMAT_VERSION as i32 {
        return Err(StoreError::FutureVersion {
            file: place(id),
            found: u32::try_from(version).unwrap_or(u32::MAX),
        });
    }
    let mut meta: SessionMeta =
        serde_json::from_str(row.get::<_, &str>(1)).map_err(|e| StoreError::Corrupt {
            file: place(id),
            line: 0,
            reason: format!("unreadable meta ({e})"),
        })?;
    let before = meta.clone();
    change(&mut meta);
    if meta == before {
        return Ok(Some(meta));
    }
    let text = serde_json::to_string(&meta).map_err(json_err)?;
    tx.execute(
        "UPDATE lrg_sessions SET meta = $2, archived = $3 WHERE id = $1",
        &[&id.as_str(), &text, &meta.archived],
    )
    .await
    .map_err(db)?;
    tx.commit().await.map_err(db)?;
    Ok(Some(meta))
}
