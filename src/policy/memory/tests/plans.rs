//! Request sources, protection values (memory.min, memory.low, memory.high), kernel caveats,
//! bad inputs and the plan's JSON form; property tests of the swap and memory.high math.

use proptest::prelude::*;

use super::*;

/// A case, its QoS class and where that came from, and its request range and source.
type Sourced = (Case, QosClass, Source, Option<(u64, u64, Source)>);

/// The request from what kubelet sends (memory.min, swap, oom_score_adj), and Guaranteed pods.
fn sourced_cases_kubelet() -> Vec<Sourced> {
    vec![
        (
            Case {
                unified: vec![("memory.swap.max", "536870912")],
                ..kubelet_burstable("request inverted from kubelet's swap")
            },
            QosClass::Burstable,
            Source::CgroupParent,
            Some((GI, GI + 1, Source::KubeletSwapMax)),
        ),
        (
            Case {
                unified: vec![("memory.min", "1073741824"), ("memory.swap.max", "5")],
                ..kubelet_burstable("memory.min beats swap")
            },
            QosClass::Burstable,
            Source::CgroupParent,
            Some((GI, GI, Source::KubeletUnified)),
        ),
        (
            kubelet_burstable("oom_score_adj 938 bounds the request"),
            QosClass::Burstable,
            Source::CgroupParent,
            Some((1065151890, 1082331758, Source::OomScoreAdj)),
        ),
        (
            Case { oom: 999, ..kubelet_burstable("oom 999 says nothing") },
            QosClass::Burstable,
            Source::CgroupParent,
            None,
        ),
        (
            Case { oom: 3, ..kubelet_burstable("oom 3: at least 99.7% of memory") },
            QosClass::Burstable,
            Source::CgroupParent,
            Some((17128329577, u64::MAX, Source::OomScoreAdj)),
        ),
        (
            Case { parent: "/kubepods/pod1", oom: -997, limit: GI, ..base("Guaranteed: request = limit") },
            QosClass::Guaranteed,
            Source::CgroupParent,
            Some((GI, GI, Source::Resources)),
        ),
    ]
}

/// QoS classes from systemd paths, crictl annotations, oom_score_adj and resources.
fn sourced_cases_paths_and_crictl() -> Vec<Sourced> {
    vec![
        (
            Case {
                parent: "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1.slice",
                ..base("systemd BestEffort path")
            },
            QosClass::BestEffort,
            Source::CgroupParent,
            None,
        ),
        (
            Case { parent: "kubepods-pod1.slice", limit: GI, ..base("systemd Guaranteed") },
            QosClass::Guaranteed,
            Source::CgroupParent,
            Some((GI, GI, Source::Resources)),
        ),
        (
            Case { annotations: vec![("swapcri.io/qos-class", "Guaranteed")], limit: GI, ..base("crictl annotation") },
            QosClass::Guaranteed,
            Source::Annotation,
            Some((GI, GI, Source::Resources)),
        ),
        (
            Case {
                pod_annotations: vec![("swapcri.io/qos-class", "besteffort"), ("swapcri.io/memory-request", "512Mi")],
                ..base("pod annotations")
            },
            QosClass::BestEffort,
            Source::Annotation,
            Some((512 * MI, 512 * MI, Source::Annotation)),
        ),
        (
            Case { oom: -997, limit: GI, ..base("crictl oom -997") },
            QosClass::Guaranteed,
            Source::OomScoreAdj,
            Some((GI, GI, Source::Resources)),
        ),
        (Case { oom: 1000, ..base("crictl oom 1000") }, QosClass::BestEffort, Source::OomScoreAdj, None),
        (Case { cpu_shares: 2, ..base("crictl no resources") }, QosClass::BestEffort, Source::Resources, None),
        (Case { limit: GI, ..base("crictl limit only") }, QosClass::Burstable, Source::Resources, None),
        (
            Case {
                annotations: vec![("swapcri.io/qos-class", "BestEffort"), ("swapcri.io/memory-request", "1Gi")],
                ..kubelet_burstable("annotations ignored under kubelet")
            },
            QosClass::Burstable,
            Source::CgroupParent,
            Some((1065151890, 1082331758, Source::OomScoreAdj)),
        ),
    ]
}

#[test]
fn qos_class_and_request_come_from_the_best_source() {
    let cases = [sourced_cases_kubelet(), sourced_cases_paths_and_crictl()].concat();
    for (case, qos, qos_source, request) in cases {
        let plan = run(&case).unwrap_or_else(|e| panic!("{}: {e}", case.name));
        assert_eq!((plan.qos_class, plan.qos_source), (qos, qos_source), "{}", case.name);
        assert_eq!(plan.request.map(|r| (r.low, r.high, r.source)), request, "{}", case.name);
    }
    let ignored = run(&Case { annotations: vec![("swapcri.io/critical", "true")], ..kubelet_burstable("x") }).unwrap();
    assert!(ignored.notes[0].contains("ignored"), "{:?}", ignored.notes);
    assert!(ignored.critical.is_none());
}

#[test]
fn oom_score_adj_bounds_contain_the_request() {
    // kubelet: 1000 − 1000·request/capacity (integer division), clamped to [3, 999].
    let cap = 16 * GI;
    for request in [200 * MI, GI, 3 * GI + 17, 8 * GI, 15 * GI] {
        let adj = (1000 - (1000 * request as i64) / cap as i64).clamp(3, 999);
        let case = Case { oom: adj, ..kubelet_burstable("oom bound") };
        let r = run(&case).unwrap().request.expect("a bound");
        assert!(r.low <= request && request <= r.high, "request {request} outside {r:?} (adj {adj})");
    }
}

/// Expected memory.min, memory.low and memory.high.
type Expect = (Option<CgroupValue>, Option<CgroupValue>, Option<CgroupValue>);

/// kubelet's MemoryQoS values, and the reservation designs none and min.
fn protection_cases_kubelet_min() -> Vec<(Case, Expect)> {
    let req_1g = ("swapcri.io/memory-request", "1Gi");
    vec![
        (
            Case {
                unified: vec![("memory.min", "1073741824"), ("memory.high", "1900000000")],
                ..kubelet_burstable("kubelet MemoryQoS values applied")
            },
            (bytes(GI), None, bytes(1900000000)),
        ),
        (
            Case {
                unified: vec![("memory.min", "0"), ("memory.low", "0"), ("memory.high", "0")],
                ..kubelet_burstable("\"0\" resets: min/low 0, high max")
            },
            (bytes(0), bytes(0), Some(CgroupValue::Max)),
        ),
        (kubelet_burstable("nothing sent, nothing of our own"), (None, None, None)),
        (
            Case {
                unified: vec![("memory.min", "1073741824")],
                reservation: Reservation::None,
                ..base("reservation none drops kubelet's")
            },
            (None, None, None),
        ),
        (
            Case { annotations: vec![req_1g], reservation: Reservation::Min, ..base("min: memory.min = request") },
            (bytes(GI), None, None),
        ),
        (
            Case {
                annotations: vec![("swapcri.io/qos-class", "Guaranteed")],
                limit: GI,
                reservation: Reservation::Tiered,
                ..base("tiered Guaranteed")
            },
            (bytes(GI), None, None),
        ),
    ]
}

/// The tiered design, memory.high from the factor or kubelet, and cgroup v1.
fn protection_cases_tiered_high() -> Vec<(Case, Expect)> {
    let req_1g = ("swapcri.io/memory-request", "1Gi");
    vec![
        (
            Case {
                annotations: vec![req_1g],
                limit: 2 * GI,
                reservation: Reservation::Tiered,
                ..base("tiered Burstable")
            },
            (None, bytes(GI), None),
        ),
        (Case { cpu_shares: 2, reservation: Reservation::Tiered, ..base("tiered BestEffort") }, (None, None, None)),
        (
            Case {
                annotations: vec![req_1g],
                limit: 2 * GI,
                factor: Some(0.9),
                ..base("high = request + 0.9 (limit - request)")
            },
            (None, None, bytes(2040107008)),
        ),
        (
            Case { annotations: vec![req_1g], factor: Some(0.9), ..base("high without limit uses allocatable") },
            (None, None, bytes(throttle_high(GI, 15 * GI, 0.9, 4096))),
        ),
        (
            Case { annotations: vec![req_1g], limit: GI, factor: Some(0.9), ..base("no high when request == limit") },
            (None, None, None),
        ),
        (
            Case {
                annotations: vec![req_1g],
                limit: GI + 4096,
                factor: Some(0.5),
                ..base("no high unless above the request")
            },
            (None, None, None),
        ),
        (
            Case {
                unified: vec![("memory.high", "1900000000")],
                factor: Some(0.5),
                ..kubelet_burstable("kubelet's high wins over our factor")
            },
            (None, None, bytes(1900000000)),
        ),
        (
            Case {
                v2: false,
                unified: vec![("memory.min", "1073741824")],
                factor: Some(0.9),
                ..kubelet_burstable("cgroup v1: nothing")
            },
            (None, None, None),
        ),
    ]
}

#[test]
fn protection_values() {
    let cases = [protection_cases_kubelet_min(), protection_cases_tiered_high()].concat();
    for (case, (min, low, high)) in cases {
        let plan = run(&case).unwrap_or_else(|e| panic!("{}: {e}", case.name));
        assert_eq!((plan.min.value, plan.low.value, plan.high.value), (min, low, high), "{}: {plan:#?}", case.name);
    }
}

#[test]
fn reservation_designs_need_a_parent_swapcri_owns() {
    for reservation in [Reservation::Min, Reservation::Tiered] {
        let err = run(&Case { reservation, ..kubelet_burstable("x") }).unwrap_err();
        assert!(matches!(err, PolicyError::Unsupported(ref m) if m.contains("belongs to kubelet")), "{err}");
    }
}

#[test]
fn old_kernels_get_a_warning_with_memory_high() {
    let plan = run(&Case {
        kernel: (5, 4),
        annotations: vec![("swapcri.io/memory-request", "1Gi")],
        limit: 2 * GI,
        factor: Some(0.9),
        ..base("x")
    })
    .unwrap();
    assert!(plan.notes.iter().any(|n| n.contains("5.9")), "{:?}", plan.notes);
    let plan = run(&Case {
        kernel: (5, 9),
        annotations: vec![("swapcri.io/memory-request", "1Gi")],
        limit: 2 * GI,
        factor: Some(0.9),
        ..base("x")
    })
    .unwrap();
    assert!(plan.notes.is_empty());
}

#[test]
fn bad_values_are_invalid_arguments() {
    for case in [
        Case { unified: vec![("memory.swap.max", "lots")], ..base("bad unified") },
        Case { unified: vec![("memory.min", "-1")], ..base("negative unified") },
        Case { annotations: vec![("swapcri.io/memory-request", "1.5Gi")], ..base("bad quantity") },
        Case { annotations: vec![("swapcri.io/qos-class", "Gold")], ..base("bad class") },
        Case { annotations: vec![("swapcri.io/critical", "yes")], ..base("bad bool") },
    ] {
        assert!(matches!(run(&case), Err(PolicyError::Invalid(_))), "{}", case.name);
    }
}

#[test]
fn plans_round_trip_through_json() {
    let plan = run(&Case {
        unified: vec![("memory.swap.max", "0"), ("memory.min", "1073741824")],
        behavior: SwapBehavior::LimitedSwap,
        ..kubelet_burstable("x")
    })
    .unwrap();
    let json = serde_json::to_string(&plan).unwrap();
    assert!(json.contains("\"swap_max\":{\"value\":\"0\""), "{json}");
    assert_eq!(serde_json::from_str::<MemoryPlan>(&json).unwrap(), plan);
}

proptest! {
    #[test]
    fn limited_swap_stays_within_the_pods_share_and_grows_with_the_request(
        mem in GI..(1u64 << 40),
        swap_factor in 0.0f64..2.0,
        reserved_factor in 0.0f64..1.0,
        r1 in 1u64..(1u64 << 40),
        r2 in 1u64..(1u64 << 40),
    ) {
        let swap = (mem as f64 * swap_factor) as u64;
        let reserved = (swap as f64 * reserved_factor) as u64;
        let available = swap - reserved;
        let (r1, r2) = (r1 % mem + 1, r2 % mem + 1);
        let (lo, hi) = (r1.min(r2), r1.max(r2));
        let s = |r| kubelet_limited_swap(r, mem, available);
        prop_assert!(s(lo) <= s(hi));
        prop_assert!(s(hi) <= available);
        // Through the whole policy too, for every class.
        for class in ["Guaranteed", "Burstable", "BestEffort"] {
            let request = lo.to_string();
            let case = Case {
                mem, swap, reserved,
                annotations: vec![("swapcri.io/qos-class", Box::leak(class.to_string().into_boxed_str())), ("swapcri.io/memory-request", Box::leak(request.into_boxed_str()))],
                limit: if class == "Guaranteed" { lo } else { 0 },
                ..limited("prop")
            };
            let plan = run(&case).unwrap();
            match (class, plan.swap_max.value) {
                (_, None) => prop_assert_eq!(swap, 0),
                ("Burstable", Some(CgroupValue::Bytes(v))) => prop_assert_eq!(v, s(lo)),
                (_, Some(v)) => prop_assert_eq!(v, CgroupValue::Bytes(0)),
            }
        }
    }

    #[test]
    fn memory_high_lies_between_request_and_limit(
        request in 0u64..(1u64 << 40),
        extra in 1u64..(1u64 << 40),
        factor in 0.01f64..=1.0,
    ) {
        let limit = request + extra;
        let high = throttle_high(request, limit, factor, 4096);
        prop_assert!(high <= limit);
        prop_assert_eq!(high % 4096, 0);
        let case = Case {
            annotations: vec![("swapcri.io/memory-request", Box::leak(request.to_string().into_boxed_str()))],
            limit, factor: Some(factor), mem: 1 << 42, ..base("prop")
        };
        if let Some(CgroupValue::Bytes(v)) = run(&case).unwrap().high.value {
            prop_assert!(request < v && v <= limit);
        }
    }

    #[test]
    fn swap_inversion_recovers_the_request_range(request in 1u64..(16 * GI)) {
        let mem = 16 * GI;
        let swap = kubelet_limited_swap(request, mem, 8 * GI);
        prop_assume!(swap > 0);
        let case = Case { unified: vec![("memory.swap.max", Box::leak(swap.to_string().into_boxed_str()))], ..kubelet_burstable("prop") };
        let r = run(&case).unwrap().request.unwrap();
        prop_assert!(r.low <= request && request <= r.high, "{request} not in {r:?}");
        prop_assert_eq!(kubelet_limited_swap(r.low, mem, 8 * GI), swap);
        prop_assert_eq!(kubelet_limited_swap(r.high, mem, 8 * GI), swap);
    }
}
