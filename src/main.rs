//! `rocketns`: start the NameServer, like `mqnamesrv`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use rocketns::{NameServer, NamesrvConfig};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// A drop-in Apache RocketMQ NameServer. Listens on port 9876 unless the config file says otherwise.
#[derive(Parser, Debug)]
#[command(name = "rocketns", version, about)]
struct Cli {
    /// Java properties file with NameServer keys (listenPort, scanNotActiveBrokerInterval, kvConfigPath, …).
    #[arg(short = 'c', long = "configFile", value_name = "FILE")]
    config_file: Option<PathBuf>,
    /// Print every config key with its effective value, then exit.
    #[arg(short = 'p', long = "printConfigItem")]
    print_config: bool,
    /// Accepted for compatibility with mqnamesrv; a NameServer has no use for it.
    #[arg(short = 'n', long = "namesrvAddr", value_name = "ADDRS")]
    namesrv_addr: Option<String>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let config = match &cli.config_file {
        Some(path) => match NamesrvConfig::load_file(path) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("rocketns: {e}");
                return ExitCode::FAILURE;
            }
        },
        None => NamesrvConfig::default(),
    };
    if cli.print_config {
        print!("{}", config.to_properties_text());
        return ExitCode::SUCCESS;
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("rocketns: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async move {
        let server = match NameServer::bind(config).await {
            Ok(s) => s,
            Err(e) => {
                eprintln!("rocketns: cannot listen: {e}");
                return ExitCode::FAILURE;
            }
        };
        let addr = server.local_addr().map(|a| a.to_string()).unwrap_or_default();
        tracing::info!("The Name Server boot success. serializeType=JSON, address {addr}");
        server.run(shutdown_signal()).await;
        tracing::info!("The Name Server stopped");
        ExitCode::SUCCESS
    })
}

/// Resolves on SIGINT or SIGTERM.
async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = ctrl_c => {},
                    _ = term.recv() => {},
                }
            }
            Err(_) => {
                let _ = ctrl_c.await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}
