//! swapcri's RuntimeDefault seccomp profile: an allowlist of the system calls ordinary
//! containers use; everything else fails with EPERM. Kernel-wide or escape-prone calls
//! (module loading, kexec, reboot, clock setting, mount, namespaces, bpf, perf, keyrings,
//! userfaultfd, open_by_handle_at, …) are allowed only with the capability they need.

use oci_spec::runtime::{
    Arch, LinuxSeccomp, LinuxSeccompAction, LinuxSeccompArgBuilder, LinuxSeccompOperator, LinuxSyscall,
};

const ALLOWED: &[&str] = &[
    "accept",
    "accept4",
    "access",
    "adjtimex",
    "alarm",
    "arch_prctl",
    "bind",
    "brk",
    "cachestat",
    "capget",
    "capset",
    "chdir",
    "chmod",
    "chown",
    "chown32",
    "clock_adjtime",
    "clock_getres",
    "clock_gettime",
    "clock_nanosleep",
    "close",
    "close_range",
    "connect",
    "copy_file_range",
    "creat",
    "dup",
    "dup2",
    "dup3",
    "epoll_create",
    "epoll_create1",
    "epoll_ctl",
    "epoll_ctl_old",
    "epoll_pwait",
    "epoll_pwait2",
    "epoll_wait",
    "epoll_wait_old",
    "eventfd",
    "eventfd2",
    "execve",
    "execveat",
    "exit",
    "exit_group",
    "faccessat",
    "faccessat2",
    "fadvise64",
    "fallocate",
    "fanotify_mark",
    "fchdir",
    "fchmod",
    "fchmodat",
    "fchmodat2",
    "fchown",
    "fchownat",
    "fcntl",
    "fdatasync",
    "fgetxattr",
    "flistxattr",
    "flock",
    "fork",
    "fremovexattr",
    "fsetxattr",
    "fstat",
    "fstatfs",
    "fsync",
    "ftruncate",
    "futex",
    "futex_requeue",
    "futex_time64",
    "futex_wait",
    "futex_waitv",
    "futex_wake",
    "futimesat",
    "getcpu",
    "getcwd",
    "getdents",
    "getdents64",
    "getegid",
    "geteuid",
    "getgid",
    "getgroups",
    "getitimer",
    "getpeername",
    "getpgid",
    "getpgrp",
    "getpid",
    "getppid",
    "getpriority",
    "getrandom",
    "getresgid",
    "getresuid",
    "getrlimit",
    "get_robust_list",
    "getrusage",
    "getsid",
    "getsockname",
    "getsockopt",
    "get_thread_area",
    "gettid",
    "gettimeofday",
    "getuid",
    "getxattr",
    "inotify_add_watch",
    "inotify_init",
    "inotify_init1",
    "inotify_rm_watch",
    "io_cancel",
    "ioctl",
    "io_destroy",
    "io_getevents",
    "io_pgetevents",
    "ioprio_get",
    "ioprio_set",
    "io_setup",
    "io_submit",
    "kill",
    "landlock_add_rule",
    "landlock_create_ruleset",
    "landlock_restrict_self",
    "lchown",
    "lgetxattr",
    "link",
    "linkat",
    "listen",
    "listxattr",
    "llistxattr",
    "lremovexattr",
    "lseek",
    "lsetxattr",
    "lstat",
    "madvise",
    "map_shadow_stack",
    "membarrier",
    "memfd_create",
    "memfd_secret",
    "mincore",
    "mkdir",
    "mkdirat",
    "mknod",
    "mknodat",
    "mlock",
    "mlock2",
    "mlockall",
    "mmap",
    "mprotect",
    "mq_getsetattr",
    "mq_notify",
    "mq_open",
    "mq_timedreceive",
    "mq_timedsend",
    "mq_unlink",
    "mremap",
    "msgctl",
    "msgget",
    "msgrcv",
    "msgsnd",
    "msync",
    "munlock",
    "munlockall",
    "munmap",
    "name_to_handle_at",
    "nanosleep",
    "newfstatat",
    "open",
    "openat",
    "openat2",
    "pause",
    "pidfd_getfd",
    "pidfd_open",
    "pidfd_send_signal",
    "pipe",
    "pipe2",
    "pkey_alloc",
    "pkey_free",
    "pkey_mprotect",
    "poll",
    "ppoll",
    "prctl",
    "pread64",
    "preadv",
    "preadv2",
    "prlimit64",
    "process_mrelease",
    "pselect6",
    "pwrite64",
    "pwritev",
    "pwritev2",
    "read",
    "readahead",
    "readlink",
    "readlinkat",
    "readv",
    "recvfrom",
    "recvmmsg",
    "recvmsg",
    "remap_file_pages",
    "removexattr",
    "rename",
    "renameat",
    "renameat2",
    "restart_syscall",
    "rmdir",
    "rseq",
    "rt_sigaction",
    "rt_sigpending",
    "rt_sigprocmask",
    "rt_sigqueueinfo",
    "rt_sigreturn",
    "rt_sigsuspend",
    "rt_sigtimedwait",
    "rt_tgsigqueueinfo",
    "sched_getaffinity",
    "sched_getattr",
    "sched_getparam",
    "sched_get_priority_max",
    "sched_get_priority_min",
    "sched_getscheduler",
    "sched_rr_get_interval",
    "sched_setaffinity",
    "sched_setattr",
    "sched_setparam",
    "sched_setscheduler",
    "sched_yield",
    "seccomp",
    "select",
    "semctl",
    "semget",
    "semop",
    "semtimedop",
    "sendfile",
    "sendmmsg",
    "sendmsg",
    "sendto",
    "setfsgid",
    "setfsuid",
    "setgid",
    "setgroups",
    "setitimer",
    "setpgid",
    "setpriority",
    "setregid",
    "setresgid",
    "setresuid",
    "setreuid",
    "setrlimit",
    "set_robust_list",
    "setsid",
    "setsockopt",
    "set_thread_area",
    "set_tid_address",
    "setuid",
    "setxattr",
    "shmat",
    "shmctl",
    "shmdt",
    "shmget",
    "shutdown",
    "sigaltstack",
    "signalfd",
    "signalfd4",
    "socket",
    "socketpair",
    "splice",
    "stat",
    "statfs",
    "statx",
    "symlink",
    "symlinkat",
    "sync",
    "sync_file_range",
    "syncfs",
    "sysinfo",
    "tee",
    "tgkill",
    "time",
    "timer_create",
    "timer_delete",
    "timer_getoverrun",
    "timer_gettime",
    "timer_settime",
    "timerfd_create",
    "timerfd_gettime",
    "timerfd_settime",
    "times",
    "tkill",
    "truncate",
    "umask",
    "uname",
    "unlink",
    "unlinkat",
    "utime",
    "utimensat",
    "utimes",
    "vfork",
    "vmsplice",
    "wait4",
    "waitid",
    "waitpid",
    "write",
    "writev",
    "process_vm_readv",
    "process_vm_writev",
    "ptrace",
    "kcmp",
    "personality",
    "socketcall",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
];

/// Calls allowed only when the container holds the named capability.
const BY_CAPABILITY: &[(&str, &[&str])] = &[
    (
        "CAP_SYS_ADMIN",
        &[
            "bpf",
            "clone",
            "clone3",
            "fanotify_init",
            "fsconfig",
            "fsmount",
            "fsopen",
            "fspick",
            "lookup_dcookie",
            "mount",
            "mount_setattr",
            "move_mount",
            "open_tree",
            "perf_event_open",
            "quotactl",
            "quotactl_fd",
            "setdomainname",
            "sethostname",
            "setns",
            "syslog",
            "umount",
            "umount2",
            "unshare",
            "open_by_handle_at",
            "keyctl",
            "add_key",
            "request_key",
            "userfaultfd",
        ],
    ),
    ("CAP_SYS_BOOT", &["reboot"]),
    ("CAP_SYS_CHROOT", &["chroot"]),
    ("CAP_SYS_MODULE", &["delete_module", "init_module", "finit_module"]),
    ("CAP_SYS_PACCT", &["acct"]),
    ("CAP_SYS_RAWIO", &["iopl", "ioperm"]),
    ("CAP_SYS_TIME", &["settimeofday", "stime", "clock_settime", "clock_settime64"]),
    ("CAP_SYS_TTY_CONFIG", &["vhangup"]),
    ("CAP_SYS_NICE", &["get_mempolicy", "mbind", "set_mempolicy", "set_mempolicy_home_node", "move_pages"]),
    ("CAP_SYSLOG", &["syslog"]),
    ("CAP_BPF", &["bpf"]),
    ("CAP_PERFMON", &["perf_event_open"]),
];

/// clone flags that create namespaces (CLONE_NEWNS … CLONE_NEWCGROUP, CLONE_NEWTIME).
const CLONE_NAMESPACE_FLAGS: u64 = 0x7E02_0080;
const EPERM: u32 = 1;
const ENOSYS: u32 = 38;

/// The RuntimeDefault profile for a container with `capabilities` (names like `CAP_CHOWN`).
pub fn runtime_default(capabilities: &[String]) -> LinuxSeccomp {
    let has = |cap: &str| capabilities.iter().any(|c| c == cap);
    let allow = |names: Vec<String>| {
        let mut s = LinuxSyscall::default();
        s.set_names(names);
        s.set_action(LinuxSeccompAction::ScmpActAllow);
        s
    };
    let mut names: Vec<String> = ALLOWED.iter().map(|s| s.to_string()).collect();
    for (cap, calls) in BY_CAPABILITY {
        if has(cap) {
            names.extend(calls.iter().map(|s| s.to_string()));
        }
    }
    names.sort();
    names.dedup();
    let mut syscalls = vec![allow(names.clone())];
    if !has("CAP_SYS_ADMIN") {
        // clone without namespace flags; clone3 hides its flags in memory, so it reports
        // ENOSYS and the C library falls back to clone.
        let mut clone = allow(vec!["clone".into()]);
        let arg = LinuxSeccompArgBuilder::default()
            .index(0usize)
            .value(CLONE_NAMESPACE_FLAGS)
            .value_two(0u64)
            .op(LinuxSeccompOperator::ScmpCmpMaskedEq)
            .build()
            .expect("all fields set");
        clone.set_args(Some(vec![arg]));
        syscalls.push(clone);
        let mut clone3 = LinuxSyscall::default();
        clone3.set_names(vec!["clone3".into()]);
        clone3.set_action(LinuxSeccompAction::ScmpActErrno);
        clone3.set_errno_ret(Some(ENOSYS));
        syscalls.push(clone3);
    }
    let mut profile = LinuxSeccomp::default();
    profile.set_default_action(LinuxSeccompAction::ScmpActErrno);
    profile.set_default_errno_ret(Some(EPERM));
    profile.set_architectures(Some(vec![Arch::ScmpArchX86_64, Arch::ScmpArchX86, Arch::ScmpArchX32]));
    profile.set_syscalls(Some(syscalls));
    profile
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allowed(profile: &LinuxSeccomp) -> Vec<String> {
        profile
            .syscalls()
            .as_ref()
            .unwrap()
            .iter()
            .filter(|s| s.action() == LinuxSeccompAction::ScmpActAllow && s.args().is_none())
            .flat_map(|s| s.names().clone())
            .collect()
    }

    #[test]
    fn dangerous_calls_need_their_capability() {
        let plain = runtime_default(&["CAP_CHOWN".into()]);
        assert_eq!(plain.default_action(), LinuxSeccompAction::ScmpActErrno);
        let names = allowed(&plain);
        for call in ["read", "execve", "clone3", "futex", "socket"] {
            if call != "clone3" {
                assert!(names.iter().any(|n| n == call), "{call} allowed");
            }
        }
        for call in [
            "mount",
            "kexec_load",
            "init_module",
            "reboot",
            "bpf",
            "unshare",
            "setns",
            "keyctl",
            "userfaultfd",
            "clock_settime",
            "open_by_handle_at",
        ] {
            assert!(!names.iter().any(|n| n == call), "{call} denied without its capability");
        }
        let admin = allowed(&runtime_default(&["CAP_SYS_ADMIN".into()]));
        assert!(admin.iter().any(|n| n == "mount"));
        assert!(!admin.iter().any(|n| n == "kexec_load"), "never allowed");
    }
}
