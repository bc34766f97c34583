//! `lrg`: the command-line face of lrg. A thin composition of the library
//! crates: every decision about models, tools, permissions and events is
//! theirs; this binary parses flags, wires the pieces and prints.

// First, so that its `eprintln!` and `eprint!` replace std's in every module
// below (they drop a message stderr cannot take instead of panicking).
#[macro_use]
mod out;

mod acp;
mod approve;
mod chat;
mod cli;
mod demo_server;
mod engines;
mod exit;
mod input;
mod local;
mod models;
mod printer;
mod providers;
mod resolve;
mod run;
mod serve;
mod sessions;
mod setup;
mod signals;
mod test;
mod tools;

use std::process::ExitCode;

use clap::Parser as _;

use crate::cli::{Cli, Command};
use crate::exit::Exit;

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(matches!(cli.command, Command::Serve(_)));
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
    let result = runtime.block_on(async {
        match cli.command {
            Command::Run(args) => run::run(args).await,
            Command::Chat(args) => chat::chat(args).await,
            Command::Models(args) => models::models(args).await,
            Command::Tools(args) => tools::tools(args).await,
            Command::Sessions(args) => sessions::sessions(args).await,
            Command::Serve(args) => serve::serve(args).await,
            Command::DemoServer => demo_server::serve().await,
            Command::Test(args) => test::test(args).await,
            Command::Acp(args) => acp::acp(args).await,
        }
    });
    // Child MCP servers and blocking stdin readers must not keep us alive.
    runtime.shutdown_timeout(std::time::Duration::from_millis(200));
    out::exit_code(result)
}

/// Logs go to stderr, so they never mix with a reply or JSON on stdout:
/// as `RUST_LOG` says, else off — except under `serve`, whose stderr is a
/// server's log: there warnings and errors (a damaged session file, a model
/// that could not be loaded, with the detail a remote caller is not told)
/// are written unless `RUST_LOG` says otherwise.
fn init_logging(server: bool) {
    let default = if server {
        "error,lrg=warn,lrg_chat=warn,lrg_providers=warn,lrg_llama=warn,lrg_mlx=warn"
    } else {
        "off"
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}
