//! A pod subnet for a test's own bridge that is free on this machine: a 10.N.0.0/16 that no
//! route of the main table overlaps (another runtime's bridge, a VPN, the LAN), held for the
//! life of the test process by an advisory lock, so that concurrent tests never share one.

use std::fs::File;
use std::net::Ipv4Addr;
use std::os::fd::AsRawFd;

/// The second octets tried, in order.
const CANDIDATES: std::ops::RangeInclusive<u8> = 160..=223;
const LOCKS: &str = "/run/swapcri-test-subnets";

/// A 10.N.0.0/16 held until dropped.
pub struct Subnet {
    octet: u8,
    _lock: File,
}

impl Subnet {
    pub fn cidr(&self) -> String {
        format!("10.{}.0.0/16", self.octet)
    }

    /// The bridge's address (host-local's default gateway: the first address).
    pub fn gateway(&self) -> String {
        format!("10.{}.0.1", self.octet)
    }

    /// What every address in it starts with.
    pub fn prefix(&self) -> String {
        format!("10.{}.", self.octet)
    }
}

/// The main routing table's destinations with their prefix lengths (the default route left
/// out: it overlaps everything and claims nothing).
fn routes() -> Vec<(Ipv4Addr, u32)> {
    let table = std::fs::read_to_string("/proc/net/route").expect("/proc/net/route");
    let hex = |s: &str| u32::from_str_radix(s, 16).ok();
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            // The kernel prints the addresses' bytes in memory order.
            let dst = Ipv4Addr::from(hex(f.get(1)?)?.to_le_bytes());
            let mask = u32::from(Ipv4Addr::from(hex(f.get(7)?)?.to_le_bytes()));
            (mask != 0).then_some((dst, mask.count_ones()))
        })
        .collect()
}

fn overlaps(a: Ipv4Addr, a_len: u32, b: Ipv4Addr, b_len: u32) -> bool {
    let len = a_len.min(b_len);
    let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
    u32::from(a) & mask == u32::from(b) & mask
}

/// The first candidate no route overlaps and no other test process holds; panics naming
/// what is in the way when there is none.
pub fn free_subnet() -> Subnet {
    std::fs::create_dir_all(LOCKS).expect(LOCKS);
    let routes = routes();
    for octet in CANDIDATES {
        let net = Ipv4Addr::new(10, octet, 0, 0);
        if routes.iter().any(|(dst, len)| overlaps(net, 16, *dst, *len)) {
            continue;
        }
        let lock = File::create(format!("{LOCKS}/10.{octet}.lock")).expect("subnet lock file");
        // SAFETY: flock on a descriptor this function owns.
        if unsafe { nix::libc::flock(lock.as_raw_fd(), nix::libc::LOCK_EX | nix::libc::LOCK_NB) } == 0 {
            return Subnet { octet, _lock: lock };
        }
    }
    panic!(
        "no 10.N.0.0/16 with N in {CANDIDATES:?} is free for a test bridge: routes {routes:?}, or other test processes hold them ({LOCKS})"
    );
}
