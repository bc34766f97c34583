//! The roots a [`ToolHost`] offers its servers ([`crate::tools::Root`]).

use super::{ToolHost, read};
use crate::tools::Root;

impl ToolHost {
    /// Offer `roots` to every server (`roots/list`), and tell those
    /// connected that they changed (`notifications/roots/list_changed`).
    /// None by default: a server asking gets an empty list. The CLI offers
    /// its current directory plus each `--root`; a served chat none unless
    /// its opener is given some.
    pub async fn set_roots(&self, roots: Vec<Root>) {
        if !self.roots.set(roots) {
            return;
        }
        let servers = read(&self.servers);
        futures::future::join_all(servers.iter().map(|s| s.roots_changed())).await;
    }

    /// The roots offered now.
    pub fn roots(&self) -> Vec<Root> {
        self.roots.get().as_ref().clone()
    }
}
