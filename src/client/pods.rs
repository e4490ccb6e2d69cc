//! Pod and container commands of `swapcri client`, shaped after crictl's verbs but taking
//! flags instead of JSON files, so a node without crictl can run and inspect workloads.

use std::collections::HashMap;
use std::path::PathBuf;

use crate::cri;
use crate::cri::runtime_service_client::RuntimeServiceClient;
use clap::{Args, Subcommand};
use tonic::transport::Channel;

#[derive(Debug, Subcommand)]
pub enum PodCommand {
    /// Run a pod sandbox; prints its id.
    Runp(PodArgs),
    /// Stop a pod sandbox and all its containers.
    Stopp { id: String },
    /// Remove a pod sandbox (stopping it first).
    Rmp { id: String },
    /// List pod sandboxes.
    Pods,
    /// Status of one pod sandbox.
    Inspectp {
        id: String,
        #[arg(long)]
        verbose: bool,
    },
    /// Create a container in a pod; prints its id. Arguments after `--` are its command.
    Create(ContainerArgs),
    /// Start a created container.
    Start { id: String },
    /// Stop a container (SIGTERM, then SIGKILL after the timeout).
    Stop {
        id: String,
        #[arg(long, default_value_t = 10)]
        timeout: i64,
    },
    /// Remove a container.
    Rm { id: String },
    /// List containers (of one pod with --pod).
    Ps {
        #[arg(long)]
        pod: Option<String>,
    },
    /// Status of one container.
    Inspect {
        id: String,
        #[arg(long)]
        verbose: bool,
    },
    /// Statistics of one container, or of all (CPU, memory, swap, writable layer).
    Stats { id: Option<String> },
    /// Print a container's log (the message part of each CRI log line).
    Logs { id: String },
    /// Run a command in a running container. Without -i/-t: print its output (ExecSync);
    /// with them: an interactive session through the streaming server.
    Exec {
        id: String,
        /// Seconds before the command is killed (0: no limit; ExecSync only).
        #[arg(long, default_value_t = 0)]
        timeout: i64,
        /// Pass stdin to the command.
        #[arg(short = 'i', long)]
        interactive: bool,
        /// Run the command on a terminal.
        #[arg(short = 't', long)]
        tty: bool,
        #[arg(last = true, required = true)]
        command: Vec<String>,
    },
    /// Attach to a running container's stdio (its output; with -i, its stdin). Ends when
    /// the container exits.
    Attach {
        id: String,
        #[arg(short = 'i', long)]
        interactive: bool,
        /// The container has a terminal: put the local one in raw mode and pass its size.
        #[arg(short = 't', long)]
        tty: bool,
    },
    /// Forward local ports to ports in a pod (`LOCAL:REMOTE` or `PORT`), on 127.0.0.1,
    /// until interrupted.
    PortForward {
        pod: String,
        #[arg(required = true)]
        ports: Vec<String>,
    },
}

#[derive(Debug, Args)]
pub struct PodArgs {
    name: String,
    #[arg(long, default_value = "default")]
    namespace: String,
    /// Pod UID (default: derived from namespace and name).
    #[arg(long)]
    uid: Option<String>,
    /// Directory for the pod's container logs (default /var/log/pods/<namespace>_<name>_<uid>).
    #[arg(long)]
    log_dir: Option<PathBuf>,
    /// Cgroup parent (e.g. /kubepods/burstable/pod<uid>); empty: swapcri's own parent.
    #[arg(long, default_value = "")]
    cgroup_parent: String,
    /// Share one PID namespace between the pod's containers.
    #[arg(long)]
    share_pid: bool,
    /// Annotation key=value (repeatable), e.g. swapcri.io/qos-class=Burstable.
    #[arg(long = "annotation", value_parser = key_value)]
    annotations: Vec<(String, String)>,
    /// Label key=value (repeatable).
    #[arg(long = "label", value_parser = key_value)]
    labels: Vec<(String, String)>,
    /// Runtime handler (a RuntimeClass handler of the daemon's config; empty: the default).
    #[arg(long, default_value = "")]
    runtime_handler: String,
}

#[derive(Debug, Args)]
pub struct ContainerArgs {
    /// Pod sandbox id.
    pod: String,
    name: String,
    image: String,
    /// Environment variable KEY=VALUE (repeatable).
    #[arg(long = "env", value_parser = key_value)]
    env: Vec<(String, String)>,
    /// Annotation key=value (repeatable).
    #[arg(long = "annotation", value_parser = key_value)]
    annotations: Vec<(String, String)>,
    /// Memory limit in bytes.
    #[arg(long, default_value_t = 0)]
    memory_limit: i64,
    /// CPU shares.
    #[arg(long, default_value_t = 0)]
    cpu_shares: i64,
    /// oom_score_adj as kubelet would send it (-997 Guaranteed, 1000 BestEffort).
    #[arg(long, default_value_t = 0, allow_hyphen_values = true)]
    oom_score_adj: i64,
    /// A cgroup v2 value in `unified`, as kubelet sends memory.swap.max, memory.min and
    /// memory.high (repeatable), e.g. memory.swap.max=536870912.
    #[arg(long = "unified", value_parser = key_value)]
    unified: Vec<(String, String)>,
    /// Allocate a terminal.
    #[arg(long)]
    tty: bool,
    #[arg(last = true)]
    command: Vec<String>,
}

fn key_value(s: &str) -> Result<(String, String), String> {
    s.split_once('=').map(|(k, v)| (k.to_string(), v.to_string())).ok_or_else(|| format!("{s:?} is not KEY=VALUE"))
}

fn to_map(pairs: Vec<(String, String)>) -> HashMap<String, String> {
    pairs.into_iter().collect()
}

pub async fn run(
    mut rt: RuntimeServiceClient<Channel>,
    connector: super::stream::Connector,
    command: PodCommand,
) -> anyhow::Result<String> {
    let out = match command {
        PodCommand::Runp(args) => {
            let runtime_handler = args.runtime_handler.clone();
            let config = pod_config(args);
            let req = cri::RunPodSandboxRequest { config: Some(config), runtime_handler };
            rt.run_pod_sandbox(req).await?.into_inner().pod_sandbox_id
        }
        PodCommand::Stopp { id } => {
            rt.stop_pod_sandbox(cri::StopPodSandboxRequest { pod_sandbox_id: id.clone() }).await?;
            id
        }
        PodCommand::Rmp { id } => {
            rt.remove_pod_sandbox(cri::RemovePodSandboxRequest { pod_sandbox_id: id.clone() }).await?;
            id
        }
        PodCommand::Pods => json(rt.list_pod_sandbox(cri::ListPodSandboxRequest { filter: None }).await?)?,
        PodCommand::Inspectp { id, verbose } => {
            json(rt.pod_sandbox_status(cri::PodSandboxStatusRequest { pod_sandbox_id: id, verbose }).await?)?
        }
        PodCommand::Create(args) => create(&mut rt, args).await?,
        PodCommand::Start { id } => {
            rt.start_container(cri::StartContainerRequest { container_id: id.clone() }).await?;
            id
        }
        PodCommand::Stop { id, timeout } => {
            rt.stop_container(cri::StopContainerRequest { container_id: id.clone(), timeout }).await?;
            id
        }
        PodCommand::Rm { id } => {
            rt.remove_container(cri::RemoveContainerRequest { container_id: id.clone() }).await?;
            id
        }
        PodCommand::Ps { pod } => {
            let filter = pod.map(|pod_sandbox_id| cri::ContainerFilter { pod_sandbox_id, ..Default::default() });
            json(rt.list_containers(cri::ListContainersRequest { filter }).await?)?
        }
        PodCommand::Inspect { id, verbose } => {
            json(rt.container_status(cri::ContainerStatusRequest { container_id: id, verbose }).await?)?
        }
        PodCommand::Logs { id } => logs(&mut rt, id).await?,
        PodCommand::Stats { id: Some(container_id) } => {
            json(rt.container_stats(cri::ContainerStatsRequest { container_id }).await?)?
        }
        PodCommand::Stats { id: None } => {
            json(rt.list_container_stats(cri::ListContainerStatsRequest { filter: None }).await?)?
        }
        PodCommand::Exec { id, interactive, tty, command, .. } if interactive || tty => {
            let url = rt.exec(exec_request(id, command, interactive, tty)).await?.into_inner().url;
            finish(super::stream::session(&connector, &url, interactive, tty).await?)?
        }
        PodCommand::Attach { id, interactive, tty } => {
            let url = rt.attach(attach_request(id, interactive, tty)).await?.into_inner().url;
            finish(super::stream::session(&connector, &url, interactive, tty).await?)?
        }
        PodCommand::PortForward { pod, ports } => port_forward(rt, connector, pod, ports).await?,
        PodCommand::Exec { id, timeout, command, .. } => exec_sync(&mut rt, id, command, timeout).await?,
    };
    Ok(out)
}

/// ExecSync: the command's output; its non-zero exit code becomes ours.
async fn exec_sync(
    rt: &mut RuntimeServiceClient<Channel>,
    container_id: String,
    cmd: Vec<String>,
    timeout: i64,
) -> anyhow::Result<String> {
    let resp = rt.exec_sync(cri::ExecSyncRequest { container_id, cmd, timeout }).await?.into_inner();
    let mut out = String::from_utf8_lossy(&resp.stdout).into_owned();
    out.push_str(&String::from_utf8_lossy(&resp.stderr));
    if resp.exit_code != 0 {
        return Err(super::output::CommandExit { code: resp.exit_code, output: out }.into());
    }
    Ok(out.trim_end().to_string())
}

/// Nothing more to print after a streamed session; a non-zero exit becomes ours.
fn finish(code: i32) -> anyhow::Result<String> {
    if code != 0 {
        return Err(super::output::CommandExit { code, output: String::new() }.into());
    }
    Ok(String::new())
}

/// `LOCAL:REMOTE` or `PORT` (the same on both sides).
fn port_pair(spec: &str) -> anyhow::Result<(u16, u16)> {
    let parse = |p: &str| p.parse::<u16>().ok().filter(|p| *p > 0);
    let pair = match spec.split_once(':') {
        Some((local, remote)) => parse(local).zip(parse(remote)),
        None => parse(spec).map(|p| (p, p)),
    };
    pair.ok_or_else(|| anyhow::anyhow!("{spec:?} is not PORT or LOCAL:REMOTE"))
}

/// Listens on 127.0.0.1 for each pair; every local connection gets its own session.
async fn port_forward(
    rt: RuntimeServiceClient<Channel>,
    connector: super::stream::Connector,
    pod: String,
    specs: Vec<String>,
) -> anyhow::Result<String> {
    let pairs = specs.iter().map(|s| port_pair(s)).collect::<anyhow::Result<Vec<_>>>()?;
    let mut listeners = Vec::new();
    for (local, remote) in pairs {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", local)).await?;
        println!("Forwarding from 127.0.0.1:{local} -> {remote}");
        listeners.push((listener, remote));
    }
    let mut serving = Vec::new();
    for (listener, remote) in listeners {
        let (mut rt, pod, connector) = (rt.clone(), pod.clone(), connector.clone());
        serving.push(tokio::spawn(async move {
            loop {
                let Ok((conn, _)) = listener.accept().await else { continue };
                let req = cri::PortForwardRequest { pod_sandbox_id: pod.clone(), port: vec![i32::from(remote)] };
                match rt.port_forward(req).await {
                    Ok(resp) => {
                        let url = resp.into_inner().url;
                        let connector = connector.clone();
                        tokio::spawn(async move {
                            if let Err(e) = super::stream::forward_connection(&connector, &url, remote, conn).await {
                                eprintln!("port {remote}: {e:#}");
                            }
                        });
                    }
                    Err(e) => eprintln!("port {remote}: {}", e.message()),
                }
            }
        }));
    }
    tokio::signal::ctrl_c().await?;
    Ok(String::new())
}

fn pod_config(args: PodArgs) -> cri::PodSandboxConfig {
    let uid = args.uid.unwrap_or_else(|| format!("{}-{}", args.namespace, args.name));
    let log_dir = args
        .log_dir
        .unwrap_or_else(|| PathBuf::from(format!("/var/log/pods/{}_{}_{}", args.namespace, args.name, uid)));
    let pid = if args.share_pid { cri::NamespaceMode::Pod } else { cri::NamespaceMode::Container };
    cri::PodSandboxConfig {
        metadata: Some(cri::PodSandboxMetadata { name: args.name.clone(), uid, namespace: args.namespace, attempt: 0 }),
        hostname: args.name,
        log_directory: log_dir.display().to_string(),
        labels: to_map(args.labels),
        annotations: to_map(args.annotations),
        linux: Some(cri::LinuxPodSandboxConfig {
            cgroup_parent: args.cgroup_parent,
            security_context: Some(cri::LinuxSandboxSecurityContext {
                namespace_options: Some(cri::NamespaceOption { pid: pid as i32, ..Default::default() }),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

async fn create(rt: &mut RuntimeServiceClient<Channel>, args: ContainerArgs) -> anyhow::Result<String> {
    let status = rt
        .pod_sandbox_status(cri::PodSandboxStatusRequest { pod_sandbox_id: args.pod.clone(), verbose: false })
        .await?
        .into_inner()
        .status
        .ok_or_else(|| anyhow::anyhow!("pod {} has no status", args.pod))?;
    let pid = status.linux.and_then(|l| l.namespaces).and_then(|n| n.options).map(|o| o.pid).unwrap_or_default();
    let config = cri::ContainerConfig {
        metadata: Some(cri::ContainerMetadata { name: args.name.clone(), attempt: 0 }),
        image: Some(cri::ImageSpec { image: args.image, ..Default::default() }),
        command: args.command,
        envs: args.env.into_iter().map(|(key, value)| cri::KeyValue { key, value }).collect(),
        annotations: to_map(args.annotations),
        log_path: format!("{}.log", args.name),
        tty: args.tty,
        stdin: args.tty,
        linux: Some(cri::LinuxContainerConfig {
            resources: Some(cri::LinuxContainerResources {
                memory_limit_in_bytes: args.memory_limit,
                cpu_shares: args.cpu_shares,
                oom_score_adj: args.oom_score_adj,
                unified: to_map(args.unified),
                ..Default::default()
            }),
            security_context: Some(cri::LinuxContainerSecurityContext {
                namespace_options: Some(cri::NamespaceOption { pid, ..Default::default() }),
                ..Default::default()
            }),
        }),
        ..Default::default()
    };
    // The daemon uses the pod's stored configuration; the request field stays empty.
    let req = cri::CreateContainerRequest { pod_sandbox_id: args.pod, config: Some(config), sandbox_config: None };
    Ok(rt.create_container(req).await?.into_inner().container_id)
}

async fn logs(rt: &mut RuntimeServiceClient<Channel>, id: String) -> anyhow::Result<String> {
    let status = rt
        .container_status(cri::ContainerStatusRequest { container_id: id.clone(), verbose: false })
        .await?
        .into_inner()
        .status
        .ok_or_else(|| anyhow::anyhow!("container {id} has no status"))?;
    let text = std::fs::read_to_string(&status.log_path)
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", status.log_path))?;
    Ok(crate::monitor::log::messages(&text))
}

fn json<T: serde::Serialize>(response: tonic::Response<T>) -> anyhow::Result<String> {
    Ok(super::output::to_json(response)?)
}

/// An interactive exec: stdout always; stderr apart unless a terminal merges them.
fn exec_request(container_id: String, cmd: Vec<String>, stdin: bool, tty: bool) -> cri::ExecRequest {
    cri::ExecRequest { container_id, cmd, tty, stdin, stdout: true, stderr: !tty, ..Default::default() }
}

fn attach_request(container_id: String, stdin: bool, tty: bool) -> cri::AttachRequest {
    cri::AttachRequest { container_id, stdin, tty, stdout: true, stderr: !tty, ..Default::default() }
}
