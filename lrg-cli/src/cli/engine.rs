//! How in-process engines (llama.cpp, MLX) are loaded and kept: slots,
//! saved-state memory, keep-alive and how many models stay loaded. One flag
//! group, flattened into the model flags of `run`, `chat`, `serve`, `acp`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use clap::Args;
use lrg_providers::catalog::Connections;
use lrg_providers::local_chat::{EnginePool, EngineSettings, PoolConfig};

/// The engine pool's flags. Unset ones keep the library's defaults.
#[derive(Debug, Clone, Copy, Default, Args)]
pub struct EngineArgs {
    /// Chats a loaded local model decodes at once, each in a slot of its own KV cache
    /// [default: 4]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=256))]
    pub parallel: Option<u16>,
    /// Host memory for the saved KV states of chats that lost their slot (bytes, or with
    /// KiB/MiB/GiB); past it the least recently used is dropped and prefilled again
    /// [default: 2GiB]
    #[arg(long, value_name = "SIZE", value_parser = super::flags::byte_size)]
    pub kv_cache_mem: Option<usize>,
    /// How long a local model stays loaded with no turn running: 5m, 30s, 1h, 0 (unload after
    /// each turn) or -1 (never unload) [default: 5m]
    #[arg(long, value_name = "DURATION", value_parser = keep_alive, allow_hyphen_values = true)]
    pub keep_alive: Option<KeepAlive>,
    /// The most local models loaded at once; loading another unloads the least recently used
    /// idle one [default: 1 in serve, else no limit]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    pub max_loaded_models: Option<u16>,
}

/// `--keep-alive`: a duration, or never.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeepAlive(pub Option<Duration>);

impl EngineArgs {
    /// `connections` loading engines with these settings.
    pub fn apply(&self, connections: Connections) -> Connections {
        let mut settings = EngineSettings::default();
        if let Some(n) = self.parallel {
            settings = settings.with_parallel(usize::from(n));
        }
        if let Some(bytes) = self.kv_cache_mem {
            settings = settings.with_kv_cache_mem(bytes as u64);
        }
        connections.with_engine_settings(settings)
    }

    /// Set the process's engine pool to unload by these flags (the same
    /// for every connect of a run, so setting it again changes nothing).
    pub fn configure_pool(&self) {
        let mut config = PoolConfig::default();
        if let Some(KeepAlive(keep)) = self.keep_alive {
            config = config.with_keep_alive(keep);
        }
        let fallback = match DEFAULT_MAX_LOADED.load(Ordering::Relaxed) {
            0 => None,
            n => Some(n),
        };
        let max = self.max_loaded_models.map(usize::from).or(fallback);
        EnginePool::global().set_config(config.with_max_loaded_models(max));
    }
}

/// `--max-loaded-models` when not given (0: no limit): `serve` keeps one.
static DEFAULT_MAX_LOADED: AtomicUsize = AtomicUsize::new(0);

/// Without `--max-loaded-models`, keep at most `max` models loaded (`serve`:
/// a server's memory holds one model unless told otherwise).
pub fn default_max_loaded_models(max: usize) {
    DEFAULT_MAX_LOADED.store(max, Ordering::Relaxed);
}

/// `5m`, `30s`, `1h`, `250ms`, a number of seconds, `0`, or `-1` (never).
pub fn keep_alive(s: &str) -> Result<KeepAlive, String> {
    let t = s.trim();
    if t == "-1" {
        return Ok(KeepAlive(None));
    }
    let split = t
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let scale = match unit.trim().to_ascii_lowercase().as_str() {
        "ms" => 0.001,
        "" | "s" => 1.0,
        "m" => 60.0,
        "h" => 3600.0,
        _ => return Err(format!("`{s}` is not a duration (try 5m, 30s, 0 or -1)")),
    };
    match number.parse::<f64>() {
        Ok(n) if n >= 0.0 && n * scale <= 31.0 * 86_400.0 => {
            Ok(KeepAlive(Some(Duration::from_secs_f64(n * scale))))
        }
        _ => Err(format!(
            "`{s}` is not a duration from 0 to 31 days (try 5m, 30s, 0 or -1)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keep_alive_takes_units_zero_and_never() {
        let secs = |s| keep_alive(s).unwrap().0.map(|d| d.as_secs_f64());
        assert_eq!(secs("5m"), Some(300.0));
        assert_eq!(secs("30s"), Some(30.0));
        assert_eq!(secs("45"), Some(45.0));
        assert_eq!(secs("1h"), Some(3600.0));
        assert_eq!(secs("250ms"), Some(0.25));
        assert_eq!(secs("0"), Some(0.0));
        assert_eq!(keep_alive("-1").unwrap(), KeepAlive(None));
        for bad in ["-5", "5x", "", "forever"] {
            assert!(keep_alive(bad).is_err(), "{bad}");
        }
    }
}
