//! Interface counters of a pod's network namespace, from `/proc/<pid>/net/dev` of a process
//! inside it (the view of that process's namespace).

/// One interface's counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InterfaceCounters {
    pub name: String,
    pub rx_bytes: u64,
    pub rx_packets: u64,
    pub rx_errors: u64,
    pub rx_dropped: u64,
    pub tx_bytes: u64,
    pub tx_packets: u64,
    pub tx_errors: u64,
    pub tx_dropped: u64,
}

/// Parses `net/dev`: two header lines, then `name: rx(8 fields) tx(8 fields)`. The
/// loopback interface is left out, as cadvisor does.
pub fn parse_net_dev(text: &str) -> Vec<InterfaceCounters> {
    text.lines()
        .skip(2)
        .filter_map(|l| {
            let (name, rest) = l.split_once(':')?;
            let name = name.trim();
            let v: Vec<u64> = rest.split_whitespace().map(|w| w.parse().ok()).collect::<Option<_>>()?;
            (name != "lo" && v.len() >= 16).then(|| InterfaceCounters {
                name: name.to_string(),
                rx_bytes: v[0],
                rx_packets: v[1],
                rx_errors: v[2],
                rx_dropped: v[3],
                tx_bytes: v[8],
                tx_packets: v[9],
                tx_errors: v[10],
                tx_dropped: v[11],
            })
        })
        .collect()
}

/// The interfaces of the network namespace `pid` lives in.
pub fn of_process(pid: i32) -> Option<Vec<InterfaceCounters>> {
    std::fs::read_to_string(format!("/proc/{pid}/net/dev")).ok().map(|t| parse_net_dev(&t))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_proc_net_dev() {
        let text = "Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:     100       1    0    0    0     0          0         0      100       1    0    0    0     0       0          0
  eth0:    2048      10    1    2    0     0          0         0     4096      20    3    4    0     0       0          0
";
        let got = parse_net_dev(text);
        assert_eq!(
            got,
            vec![InterfaceCounters {
                name: "eth0".into(),
                rx_bytes: 2048,
                rx_packets: 10,
                rx_errors: 1,
                rx_dropped: 2,
                tx_bytes: 4096,
                tx_packets: 20,
                tx_errors: 3,
                tx_dropped: 4,
            }]
        );
        assert!(parse_net_dev("h\nh\n  eth0: 1 2 3\n").is_empty(), "short lines are skipped");
    }
}
