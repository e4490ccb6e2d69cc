use super::*;
use crate::model::memory::{RequestEstimate, Source};

const MI: u64 = 1 << 20;

/// A Burstable container with a 256 MiB request, a 512 MiB limit and LimitedSwap's 100 MiB.
fn limited() -> MemoryPlan {
    let mut plan = MemoryPlan::of_class(QosClass::Burstable, None);
    plan.request = Some(RequestEstimate::exact(256 * MI, Source::KubeletUnified));
    plan.limit = 512 * MI;
    plan.swap_max = Decision::set(CgroupValue::Bytes(100 * MI), "LimitedSwap");
    plan
}

fn guaranteed() -> MemoryPlan {
    let mut plan = MemoryPlan::of_class(QosClass::Guaranteed, None);
    plan.swap_max = Decision::set(CgroupValue::Bytes(0), "Guaranteed");
    plan
}

fn critical() -> MemoryPlan {
    let mut plan = limited();
    plan.critical = Some("static pod".into());
    plan.swap_max = Decision::set(CgroupValue::Bytes(0), "critical");
    plan
}

fn ask(files: &[(&str, &str)], swap: Option<i64>, limit: Option<i64>) -> MemoryAsk {
    MemoryAsk {
        limit,
        swap,
        files: files.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        owners: [("unified:memory.swap.max".to_string(), "10-swapper".to_string())].into(),
    }
}

#[test]
fn swap_may_be_lowered_not_raised_nor_given_to_the_protected() {
    let none = Allowances::default();
    let raise = Allowances { raise: true, protected: false };
    let protected = Allowances { raise: false, protected: true };
    let mi = |n: u64| (n * MI).to_string();
    // (plan, ask, allowances, the swap.max that results, or the refused field's reason fragment)
    let cases: Vec<(MemoryPlan, MemoryAsk, Allowances, Result<CgroupValue, &str>)> = vec![
        (limited(), ask(&[("memory.swap.max", &mi(50))], None, None), none, Ok(CgroupValue::Bytes(50 * MI))),
        (limited(), ask(&[("memory.swap.max", "0")], None, None), none, Ok(CgroupValue::Bytes(0))),
        (limited(), ask(&[("memory.swap.max", &mi(100))], None, None), none, Ok(CgroupValue::Bytes(100 * MI))),
        (limited(), ask(&[("memory.swap.max", &mi(101))], None, None), none, Err("above the swap policy")),
        (limited(), ask(&[("memory.swap.max", "max")], None, None), none, Err("above the swap policy")),
        (limited(), ask(&[("memory.swap.max", &mi(300))], None, None), raise, Ok(CgroupValue::Bytes(300 * MI))),
        // OCI memory+swap: limit 512 + 64 swap.
        (limited(), ask(&[], Some((576 * MI) as i64), None), none, Ok(CgroupValue::Bytes(64 * MI))),
        (limited(), ask(&[], Some((512 * MI) as i64), None), none, Ok(CgroupValue::Bytes(0))),
        (limited(), ask(&[], Some((256 * MI) as i64), None), none, Err("below the memory limit")),
        (limited(), ask(&[], Some(-1), None), none, Err("above the swap policy")),
        // A new limit is what memory+swap subtracts from.
        (limited(), ask(&[], Some((300 * MI) as i64), Some((256 * MI) as i64)), none, Ok(CgroupValue::Bytes(44 * MI))),
        (guaranteed(), ask(&[("memory.swap.max", &mi(10))], None, None), none, Err("Guaranteed")),
        (guaranteed(), ask(&[("memory.swap.max", "0")], None, None), none, Ok(CgroupValue::Bytes(0))),
        (guaranteed(), ask(&[("memory.swap.max", &mi(10))], None, None), raise, Err("Guaranteed")),
        (guaranteed(), ask(&[("memory.swap.max", &mi(10))], None, None), protected, Ok(CgroupValue::Bytes(10 * MI))),
        (critical(), ask(&[("memory.swap.max", &mi(10))], None, None), none, Err("critical pod (static pod)")),
        (limited(), ask(&[("memory.swap.max", "lots")], None, None), none, Err("not bytes or max")),
    ];
    for (n, (plan, ask, allow, want)) in cases.into_iter().enumerate() {
        let got = review(&plan, &ask, allow, true);
        match (got, want) {
            (Ok(p), Ok(v)) => {
                assert_eq!(p.swap_max.value, Some(v), "case {n}");
                assert!(p.swap_max.reason.contains("NRI plugin"), "case {n}: {}", p.swap_max.reason);
            }
            (Err(e), Err(fragment)) => assert!(e.to_string().contains(fragment), "case {n}: {e}"),
            (got, want) => panic!("case {n}: got {got:?}, want {want:?}"),
        }
    }
}

#[test]
fn high_stays_above_the_request_and_protection_below_it() {
    let none = Allowances::default();
    let mi = |n: u64| (n * MI).to_string();
    let ok = |files: &[(&str, &str)]| review(&limited(), &ask(files, None, None), none, true);
    let p = ok(&[("memory.high", &mi(300))]).unwrap();
    assert_eq!(p.high.value, Some(CgroupValue::Bytes(300 * MI)));
    assert_eq!(p.swap_max, limited().swap_max, "untouched values stay the policy's");
    assert!(ok(&[("memory.high", &mi(200))]).unwrap_err().reason.contains("below the memory request"));
    assert!(ok(&[("memory.high", "max")]).is_ok());
    assert_eq!(ok(&[("memory.min", &mi(128))]).unwrap().min.value, Some(CgroupValue::Bytes(128 * MI)));
    assert!(ok(&[("memory.low", &mi(257))]).unwrap_err().reason.contains("more than the memory request"));
    assert!(ok(&[("memory.min", "max")]).is_err());
    // Without a known request, high and protection are the plugin's.
    let mut plan = limited();
    plan.request = None;
    assert!(review(&plan, &ask(&[("memory.high", &mi(1))], None, None), none, true).is_ok());
    assert!(review(&plan, &ask(&[], None, Some(0)), none, true).is_err());
}

#[test]
fn on_cgroup_v1_values_are_checked_and_noted_not_applied() {
    let none = Allowances::default();
    let mi = |n: u64| (n * MI).to_string();
    let asked = ask(&[("memory.swap.max", &mi(50)), ("memory.high", &mi(300))], None, None);
    let p = review(&limited(), &asked, none, false).unwrap();
    assert_eq!((p.swap_max.clone(), p.high.clone()), (limited().swap_max, limited().high));
    assert_eq!(p.notes.len(), 2, "{:?}", p.notes);
    assert!(p.notes[0].contains("10-swapper") && p.notes[0].contains("cgroup v1"), "{:?}", p.notes);
    // Still refused where the policy would refuse it.
    assert!(review(&guaranteed(), &ask(&[("memory.swap.max", &mi(1))], None, None), none, false).is_err());
}
