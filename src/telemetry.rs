//! Structured logs to stdout (`text` or `json`), filtered by `RUST_LOG` (default `info`).

use tracing_subscriber::EnvFilter;

pub fn init(format: &str) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info,sqlx=warn"));
    // Colour codes only on a terminal: a log written to a file or a pipe stays plain text.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stdout());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(false)
        .with_ansi(ansi);
    let _ = if format == "json" {
        builder.json().try_init()
    } else {
        builder.try_init()
    };
}
