//! Facts of the node the tests run on, read independently of swapcri, so each test asserts
//! what this node calls for: a hybrid host (memory on cgroup v1) or a cgroup v2 node with
//! swap.

/// What a test expects of the node it runs on.
#[derive(Debug, Clone)]
pub struct NodeFacts {
    /// /sys/fs/cgroup is a cgroup2 mount (cgroup v2 only).
    pub cgroup_v2: bool,
    /// Containers' swap can be limited: cgroup v2 with the memory controller and swap
    /// accounting left on.
    pub swap_accounting: bool,
    pub mem_total: u64,
    pub swap_total: u64,
    /// (major, minor) of the running kernel.
    pub kernel: (u32, u32),
}

impl NodeFacts {
    /// Swap limits apply and mean something here.
    pub fn swap_limits_apply(&self) -> bool {
        self.cgroup_v2 && self.swap_accounting && self.swap_total > 0
    }
}

pub fn meminfo(key: &str) -> u64 {
    let text = std::fs::read_to_string("/proc/meminfo").unwrap();
    let line = text.lines().find(|l| l.starts_with(&format!("{key}:"))).unwrap();
    line.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() * 1024
}

pub fn probe() -> NodeFacts {
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap();
    let cgroup_v2 = mounts.lines().any(|l| {
        let f: Vec<&str> = l.split(' ').collect();
        f.len() > 2 && f[1] == "/sys/fs/cgroup" && f[2] == "cgroup2"
    });
    let controllers = std::fs::read_to_string("/sys/fs/cgroup/cgroup.controllers").unwrap_or_default();
    let cmdline = std::fs::read_to_string("/proc/cmdline").unwrap_or_default();
    let swap_off = cmdline.split_whitespace().any(|w| w == "swapaccount=0" || w == "cgroup.memory=noswap");
    let swap_accounting = cgroup_v2 && controllers.split_whitespace().any(|c| c == "memory") && !swap_off;
    let release = nix::sys::utsname::uname().unwrap().release().to_string_lossy().into_owned();
    let mut parts = release.split(|c: char| !c.is_ascii_digit()).filter_map(|p| p.parse::<u32>().ok());
    let kernel = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    NodeFacts { cgroup_v2, swap_accounting, mem_total: meminfo("MemTotal"), swap_total: meminfo("SwapTotal"), kernel }
}

/// Whether PID 1 reaps the orphans it inherits. Processes killed inside a PID namespace
/// whose init is exiting are handed to it, and the namespace (its init with it) cannot
/// finish exiting until they are reaped: every init system reaps (systemd, tini, docker's
/// `--init`), a bare program run as PID 1 may not.
pub fn init_reaps_orphans() -> bool {
    let out = std::process::Command::new("sh").args(["-c", "sleep 0.1 & echo $!"]).output().unwrap();
    let orphan: u32 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    std::thread::sleep(std::time::Duration::from_secs(1));
    let stat = std::fs::read_to_string(format!("/proc/{orphan}/stat")).unwrap_or_default();
    // After the command's name: state, then the parent's pid.
    let fields: Vec<&str> =
        stat.rsplit_once(')').map(|(_, rest)| rest.split_whitespace().collect()).unwrap_or_default();
    !(fields.first() == Some(&"Z") && fields.get(1) == Some(&"1"))
}
