use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use clap::{CommandFactory, Parser, Subcommand};

use swapcri::config::{Config, Overrides, DEFAULT_CONFIG_PATH, DEFAULT_TOML};

/// A Kubernetes CRI runtime for nodes that run with swap.
#[derive(Parser)]
#[command(name = "swapcri", version, about)]
struct Cli {
    /// Configuration file (default /etc/swapcri/config.toml; missing means all defaults).
    #[arg(long, global = true)]
    config: Option<PathBuf>,
    /// CRI socket path.
    #[arg(long, global = true)]
    socket: Option<PathBuf>,
    /// Persistent state directory.
    #[arg(long, global = true)]
    state_root: Option<PathBuf>,
    /// Volatile state directory.
    #[arg(long, global = true)]
    run_root: Option<PathBuf>,
    /// Log filter, e.g. "debug" (RUST_LOG overrides it).
    #[arg(long, global = true)]
    log_level: Option<String>,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the CRI on the unix socket (the default).
    Serve,
    /// Configuration helpers.
    Config {
        #[command(subcommand)]
        command: ConfigCommand,
    },
    /// Talk to a running daemon over its socket (a small crictl).
    Client {
        /// PEM CA certificates to trust for a streaming server with TLS (default: the system's).
        #[arg(long)]
        streaming_ca: Option<PathBuf>,
        #[command(subcommand)]
        command: swapcri::client::ClientCommand,
    },
    /// Check this node against the swap guidance: one line per check, non-zero exit on failures.
    Doctor {
        /// Print the checks as JSON.
        #[arg(long)]
        json: bool,
        /// Read the node's files below this directory instead of / (for inspecting images).
        #[arg(long, default_value = "/")]
        root: PathBuf,
        /// kubelet's evictionHard memory.available (e.g. 100Mi or 5%), to compare with vm.min_free_kbytes.
        #[arg(long)]
        eviction_threshold: Option<String>,
        /// Read the threshold from a KubeletConfiguration file instead.
        #[arg(long, conflicts_with = "eviction_threshold")]
        kubelet_config: Option<PathBuf>,
    },
    /// Records this build could not read: the pods and containers kept aside and left
    /// running. Adopt or release one, then restart the daemon (running containers carry on).
    Quarantine {
        #[command(subcommand)]
        command: QuarantineCommand,
    },
    /// Watch swap per container: pod, QoS, swap used / limit / peak, swap-ins, memory
    /// pressure and thrash state, worst first.
    Top {
        /// Print one frame (rates over one interval) and exit.
        #[arg(long)]
        once: bool,
        /// Seconds between frames.
        #[arg(long, default_value_t = 2.0)]
        interval: f64,
    },
    /// Image store helpers.
    Image {
        #[command(subcommand)]
        command: ImageCommand,
    },
    /// Print a shell completion script, e.g. `swapcri completion bash > /etc/bash_completion.d/swapcri`.
    Completion { shell: clap_complete::Shell },
    /// Internal: write the manual pages (swapcri.8 and one per command) into DIR.
    #[command(hide = true, name = "man")]
    Man { dir: PathBuf },
}

#[derive(Subcommand)]
enum ConfigCommand {
    /// Print the default configuration, commented.
    Default,
}

#[derive(Subcommand)]
enum QuarantineCommand {
    /// List the records kept aside, with why each cannot be read.
    List,
    /// Take a record back (it must read with this build): the daemon lists it from its next start.
    Adopt { id: String },
    /// Let the next start stop and remove what the object holds, and drop its record.
    Release { id: String },
}

#[derive(Subcommand)]
enum ImageCommand {
    /// Load an OCI image layout archive (tar or tar.gz) into the image store.
    Import {
        file: PathBuf,
        /// Repository for entries that carry only a tag, or no name at all.
        #[arg(long)]
        name: Option<String>,
    },
}

fn main() {
    // Before any thread: what a service manager passed is taken out of the environment.
    let manager = swapcri::service_manager::ServiceManager::take_from_env();
    run_helper_if_asked();
    // Errors as one line (with their causes), never a debug dump or a backtrace.
    if let Err(e) = run(Cli::parse(), manager) {
        eprintln!("swapcri: {e:#}");
        std::process::exit(1);
    }
}

/// Runs the helper processes the daemon spawns (`swapcri monitor FILE` or a spare
/// `swapcri monitor -`, `swapcri sandbox-ns FILE`); returns for any other command. They are
/// not in the command line parser: building it costs a helper about 100 page faults, on
/// every container and pod start. A helper has
/// no configuration, no async runtime and no threads before it forks.
fn run_helper_if_asked() {
    let mut args = std::env::args_os().skip(1);
    let Some(command) = args.next() else { return };
    let helper: fn(&std::path::Path) -> ! = if command == swapcri::monitor::COMMAND {
        swapcri::monitor::main
    } else if command == swapcri::sandbox::HELPER_COMMAND {
        swapcri::sandbox::helper_main
    } else {
        return;
    };
    match (args.next(), args.next()) {
        (Some(spare), None) if command == swapcri::monitor::COMMAND && spare == swapcri::monitor::SPARE_ARG => {
            swapcri::monitor::spare_main()
        }
        (Some(file), None) if !file.as_encoded_bytes().starts_with(b"-") => helper(std::path::Path::new(&file)),
        _ => {
            let command = command.to_string_lossy();
            eprintln!("swapcri {command}: an internal command the daemon starts, as `swapcri {command} FILE`");
            std::process::exit(2)
        }
    }
}

fn run(cli: Cli, manager: swapcri::service_manager::ServiceManager) -> anyhow::Result<()> {
    match &cli.command {
        Some(Command::Config { command: ConfigCommand::Default }) => {
            print!("{DEFAULT_TOML}");
            return Ok(());
        }
        Some(Command::Completion { shell }) => {
            use clap_complete::Generator;
            let mut cmd = Cli::command().bin_name("swapcri");
            cmd.build();
            return Ok(shell.try_generate(&cmd, &mut std::io::stdout().lock())?);
        }
        Some(Command::Man { dir }) => return write_man_pages(dir),
        _ => {}
    }
    let path = cli.config.clone().unwrap_or_else(|| PathBuf::from(DEFAULT_CONFIG_PATH));
    let mut config = Config::load(&path, cli.config.is_some())?;
    config.apply(Overrides {
        socket: cli.socket,
        state_root: cli.state_root,
        run_root: cli.run_root,
        log_level: cli.log_level,
    })?;
    init_tracing(&config.log_level, config.log_span_timings);
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    match cli.command.unwrap_or(Command::Serve) {
        Command::Serve => runtime.block_on(swapcri::daemon::run(config, manager))?,
        Command::Image { command: ImageCommand::Import { file, name } } => runtime.block_on(async {
            let store = Arc::new(swapcri::image::ImageStore::open(&config.image_root())?);
            let imported =
                swapcri::image::import::import_archive(&store, &file, name.as_deref(), &(&config.image).into())
                    .await
                    .with_context(|| format!("importing {}", file.display()))?;
            for (name, id) in imported {
                println!("{name} {id}");
            }
            anyhow::Ok(())
        })?,
        Command::Client { streaming_ca, command } => {
            match runtime.block_on(swapcri::client::run(&config.socket, streaming_ca, command)) {
                Ok(out) if out.is_empty() => {}
                Ok(out) => println!("{out}"),
                Err(e) => match e.downcast::<swapcri::client::CommandExit>() {
                    Ok(exit) => {
                        print!("{}", exit.output);
                        std::process::exit(exit.code.clamp(1, 255));
                    }
                    Err(e) => {
                        eprintln!("error: {e:#}");
                        std::process::exit(1);
                    }
                },
            }
        }
        Command::Top { once, interval } => runtime.block_on(async {
            let channel = swapcri::client::connect(&config.socket)
                .await
                .with_context(|| format!("cannot connect to {}", config.socket.display()))?;
            let interval = std::time::Duration::from_secs_f64(interval.clamp(0.2, 3600.0));
            swapcri::client::top::run(channel, once, interval).await
        })?,
        Command::Quarantine { command } => quarantine(&config, command)?,
        Command::Doctor { json, root, eviction_threshold, kubelet_config } => {
            doctor(&config, json, root, eviction_threshold, kubelet_config)?
        }
        Command::Config { .. } | Command::Completion { .. } | Command::Man { .. } => {
            unreachable!("handled before loading the config")
        }
    }
    Ok(())
}

/// Section 8 (system administration): one page for swapcri, one per visible command.
fn write_man_pages(dir: &std::path::Path) -> anyhow::Result<()> {
    fn write(cmd: clap::Command, dir: &std::path::Path) -> anyhow::Result<()> {
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
            write(sub.clone(), dir)?;
        }
        let page = clap_mangen::Man::new(cmd).section("8").manual("swapcri manual");
        let path = page.generate_to(dir).with_context(|| format!("writing into {}", dir.display()))?;
        println!("{}", path.display());
        Ok(())
    }
    let mut cmd = Cli::command().disable_help_subcommand(true);
    cmd.build();
    write(cmd, dir)
}

fn quarantine(config: &Config, command: QuarantineCommand) -> anyhow::Result<()> {
    use swapcri::service::quarantine;
    let root = &config.state_root;
    let (done, what) = match command {
        QuarantineCommand::List => {
            for aside in quarantine::list(root)? {
                println!("{}\t{}\t{}", aside.kind, aside.id, aside.why);
            }
            return Ok(());
        }
        QuarantineCommand::Adopt { id } => (quarantine::adopt(root, &id)?, "adopted: it is listed again"),
        QuarantineCommand::Release { id } => (quarantine::release(root, &id)?, "released: what it holds is cleaned up"),
    };
    println!(
        "{} {} {what} once swapcri starts again (`systemctl restart swapcri`; running containers carry on)",
        done.kind, done.id
    );
    Ok(())
}

/// `swapcri doctor`: exits 1 when a check fails.
fn doctor(
    config: &Config,
    json: bool,
    root: PathBuf,
    eviction_threshold: Option<String>,
    kubelet_config: Option<PathBuf>,
) -> anyhow::Result<()> {
    let meminfo = std::fs::read_to_string(root.join("proc/meminfo")).unwrap_or_default();
    let mem_total = swapcri::node::memory::meminfo_bytes(&meminfo, "MemTotal").unwrap_or(0);
    let threshold = match (eviction_threshold, kubelet_config) {
        (Some(t), _) => Some(
            swapcri::doctor::parse_threshold(&t, mem_total)
                .with_context(|| format!("--eviction-threshold {t:?}: expected a quantity or a percentage"))?,
        ),
        (None, Some(file)) => {
            let text = std::fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
            Some(
                swapcri::doctor::eviction_from_kubelet_config(&text, mem_total)
                    .with_context(|| format!("{}: no evictionHard memory.available found", file.display()))?,
            )
        }
        (None, None) => None,
    };
    let inputs = swapcri::doctor::Inputs {
        root,
        system_cgroup: config.system.cgroup.clone(),
        eviction_threshold: threshold,
        cgroup_driver: config.runtime.cgroup_driver,
        state_root: Some(config.state_root.clone()),
    };
    let checks = swapcri::doctor::run_checks(&inputs);
    if json {
        println!("{}", serde_json::to_string_pretty(&checks)?);
    } else {
        print!("{}", swapcri::doctor::render_text(&checks));
    }
    if swapcri::doctor::failed(&checks) {
        std::process::exit(1);
    }
    Ok(())
}

fn init_tracing(level: &str, span_timings: bool) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    // Colours only on a terminal: journald and log files get plain text.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let spans = if span_timings {
        tracing_subscriber::fmt::format::FmtSpan::CLOSE
    } else {
        tracing_subscriber::fmt::format::FmtSpan::NONE
    };
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_span_events(spans)
        .with_ansi(ansi)
        .with_writer(std::io::stderr)
        .init();
}
