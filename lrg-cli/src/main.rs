//! `lrg`: the command-line face of lrg. A thin composition of the library
//! crates: every decision about models, tools, permissions and events is
//! theirs; this binary parses flags, wires the pieces and prints.

// First, so that its `eprintln!` and `eprint!` replace std's in every module
// below (they drop a message stderr cannot take instead of panicking).
#[macro_use]
mod out;

mod acp;
mod acp_agents;
mod approve;
mod chat;
mod cli;
mod config_file;
mod demo_server;
mod engines;
mod exit;
mod input;
mod line_editor;
mod load_bar;
mod local;
mod markdown;
mod mcp_auth;
mod mcp_prompts;
mod models;
mod prices;
mod printer;
mod prompt;
mod providers;
mod questions;
mod recap;
mod resolve;
mod resources;
mod run;
mod serve;
mod sessions;
mod setup;
mod signals;
mod style;
mod suite;
mod telemetry;
mod tools;

use std::process::ExitCode;

use clap::Parser as _;

use crate::cli::{Cli, Command};
use crate::exit::Exit;

fn main() -> ExitCode {
    let cli = Cli::parse();
    telemetry::init(matches!(cli.command, Command::Serve(_)));
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("lrg: cannot start the async runtime: {e}");
            return Exit::Failed.into();
        }
    };
    // Read by the commands that run a session; a listing command works
    // whatever the file says.
    let runs_sessions = matches!(
        cli.command,
        Command::Run(_)
            | Command::Chat(_)
            | Command::Serve(_)
            | Command::Acp(_)
            | Command::Prompt(_)
    );
    if (runs_sessions || cli.config.is_some())
        && let Err(e) = config_file::load(cli.config.as_deref())
    {
        return out::exit_code(Err(e));
    }
    if (runs_sessions || matches!(cli.command, Command::Prices(_)))
        && let Err(e) = prices::load(cli.prices.as_deref())
    {
        return out::exit_code(Err(e));
    }
    let result = runtime.block_on(async {
        match cli.command {
            Command::Run(args) => run::run(args).await,
            Command::Chat(args) => chat::chat(args).await,
            Command::Models(args) => models::models(args).await,
            Command::Tools(args) => tools::tools(args).await,
            Command::Resources(args) => resources::resources(args).await,
            Command::Prompts(args) => mcp_prompts::prompts(args).await,
            Command::Sessions(args) => sessions::sessions(args).await,
            Command::Serve(args) => serve::serve(args).await,
            Command::DemoServer => demo_server::serve().await,
            Command::Test(args) => suite::test(args).await,
            Command::Acp(args) => acp::acp(args).await,
            Command::Prompt(args) => prompt::prompt(args).await,
            Command::Prices(args) => prices::prices(args).await,
            Command::Mcp(args) => mcp_auth::mcp(args).await,
        }
    });
    // Child MCP servers and blocking stdin readers must not keep us alive.
    runtime.shutdown_timeout(std::time::Duration::from_millis(200));
    // The last spans and metrics, within a second whatever the collector does.
    telemetry::shutdown();
    out::exit_code(result)
}
