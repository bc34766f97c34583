//! The host's catalog: every tool of every source, named uniquely, rebuilt
//! when a source's tools change.

use std::collections::HashMap;
use std::sync::Arc;

use lrg_providers::ToolSpec;

use super::super::client::ClientTool;
use super::super::mcp::{McpServer, RemoteTool};
use super::super::names::NameAllocator;
use super::super::rust_fn::FnTool;
use super::super::validate::ArgumentCheck;
use super::super::{ToolClass, ToolOutput};
use super::resources::ResourceTool;
use super::{ToolHost, ToolInfo, ToolSource, read};
use std::sync::atomic::Ordering;

/// What a name resolves to.
#[derive(Clone)]
pub(super) enum Target {
    Fn(Arc<FnTool>),
    /// Boxed: a tool spec is large, and most entries are of other kinds.
    Client(Box<ClientTool>, Arc<ArgumentCheck>),
    Mcp {
        server: Arc<McpServer>,
        tool: Arc<RemoteTool>,
    },
    /// One of lrg's resource tools (see [`super::resources`]).
    Resources(ResourceTool),
}

pub(super) struct Entry {
    pub(super) info: ToolInfo,
    pub(super) target: Target,
}

pub(super) struct Catalog {
    /// The `changes` value it was built from; `u64::MAX` = never built.
    pub(super) built_from: u64,
    pub(super) entries: Vec<Entry>,
    pub(super) by_name: HashMap<String, usize>,
    /// Every entry's spec, in order: what listing hands out.
    pub(super) specs: Arc<[ToolSpec]>,
    /// Tools a server's config keeps from being offered: (server, tool).
    pub(super) held_back: Vec<(String, String)>,
}

impl ToolHost {
    /// The current catalog, rebuilt if any source's tools changed.
    pub(super) fn catalog(&self) -> Arc<Catalog> {
        let now = self.changes.load(Ordering::SeqCst);
        let current = read(&self.catalog);
        if current.built_from == now {
            return current;
        }
        let fresh = Arc::new(self.build_catalog(now));
        *lrg_providers::sync::write(&self.catalog) = fresh.clone();
        fresh
    }

    fn build_catalog(&self, built_from: u64) -> Catalog {
        let mut names = NameAllocator::new();
        let mut entries = Vec::new();
        for f in read(&self.fns) {
            let name = names.allocate("rust", &f.spec.name);
            let spec = ToolSpec {
                name,
                ..f.spec.clone()
            };
            let class = ToolClass::from_annotations(&spec.annotations);
            entries.push(Entry {
                info: ToolInfo {
                    spec,
                    class,
                    source: ToolSource::Rust,
                },
                target: Target::Fn(f),
            });
        }
        for tool in read(&self.client) {
            let name = names.allocate("client", &tool.spec.name);
            let spec = ToolSpec {
                name,
                ..tool.spec.clone()
            };
            let class = ToolClass::from_annotations(&spec.annotations);
            let check = Arc::new(ArgumentCheck::new(&spec.name, &spec.input_schema));
            entries.push(Entry {
                info: ToolInfo {
                    spec,
                    class,
                    source: ToolSource::Client,
                },
                target: Target::Client(Box::new(tool), check),
            });
        }
        // lrg's own resource tools, when any server has resources.
        if self.offers_resources() {
            for which in ResourceTool::ALL {
                let spec = which.spec();
                let name = names.allocate("rust", &spec.name);
                let spec = ToolSpec {
                    name,
                    ..spec.clone()
                };
                entries.push(Entry {
                    info: ToolInfo {
                        class: ToolClass::from_annotations(&spec.annotations),
                        spec,
                        source: ToolSource::Rust,
                    },
                    target: Target::Resources(which),
                });
            }
        }
        let policies = read(&self.policies);
        let mut held_back = Vec::new();
        for server in read(&self.servers) {
            let policy = policies.get(&server.name);
            for tool in server.tools().iter() {
                if policy.is_some_and(|p| !p.offers(&tool.name)) {
                    held_back.push((server.name.clone(), tool.name.clone()));
                    continue;
                }
                let name = names.allocate(&server.name, &tool.name);
                let spec = ToolSpec {
                    name,
                    ..tool.spec.clone()
                };
                let class = ToolClass::from_annotations(&spec.annotations);
                entries.push(Entry {
                    info: ToolInfo {
                        spec,
                        class,
                        source: ToolSource::Mcp {
                            server: server.name.clone(),
                            tool: tool.name.clone(),
                        },
                    },
                    target: Target::Mcp {
                        server: server.clone(),
                        tool: tool.clone(),
                    },
                });
            }
        }
        let by_name = entries
            .iter()
            .enumerate()
            .map(|(i, e)| (e.info.spec.name.clone(), i))
            .collect();
        let specs = entries.iter().map(|e| e.info.spec.clone()).collect();
        Catalog {
            built_from,
            entries,
            by_name,
            specs,
            held_back,
        }
    }
}

pub(super) fn unknown_tool(name: &str, catalog: &Catalog) -> ToolOutput {
    let available: Vec<&str> = catalog
        .entries
        .iter()
        .map(|e| e.info.spec.name.as_str())
        .collect();
    ToolOutput::error(super::super::unknown_tool_message(name, &available))
}
