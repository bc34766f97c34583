//! The bench's helper processes: the bench binary run again with an argument
//! (the fake model server; lrg's HTTP server). A child prints `port N` when it
//! listens, answers one JSON line per command line on its stdin, and exits
//! when its stdin closes, so none outlives the bench.

use std::io::{BufRead as _, BufReader, Write as _};
use std::process::{ChildStdin, ChildStdout, Command, Stdio};

/// A running child, killed when dropped.
pub struct Child {
    process: std::process::Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    /// The port it listens on.
    pub port: u16,
}

impl Child {
    /// Start the bench binary with `args` and wait for its port.
    pub fn spawn(args: &[&str]) -> Self {
        let exe = std::env::current_exe().expect("own path");
        let mut process = Command::new(exe)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start a helper process");
        let stdin = process.stdin.take();
        let mut stdout = BufReader::new(process.stdout.take().expect("piped stdout"));
        let mut line = String::new();
        stdout.read_line(&mut line).expect("read the helper's port");
        let port = line
            .trim()
            .strip_prefix("port ")
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("helper {args:?} said {line:?}, not `port N`"));
        Self {
            process,
            stdin,
            stdout,
            port,
        }
    }

    /// Send one command line and read the one-line JSON answer.
    pub fn ask(&mut self, command: &str) -> serde_json::Value {
        let stdin = self.stdin.as_mut().expect("stdin open");
        writeln!(stdin, "{command}").expect("write to the helper");
        stdin.flush().expect("flush to the helper");
        let mut line = String::new();
        self.stdout.read_line(&mut line).expect("read the helper");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("helper answered {line:?}: {e}"))
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}

/// In a child: tell the parent the port.
pub fn announce(port: u16) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "port {port}");
    let _ = out.flush();
}

/// In a child that takes no commands: exit when the parent closes stdin
/// (or dies).
pub fn exit_with_parent() {
    std::thread::spawn(|| {
        let _ = std::io::copy(&mut std::io::stdin(), &mut std::io::sink());
        std::process::exit(0);
    });
}
