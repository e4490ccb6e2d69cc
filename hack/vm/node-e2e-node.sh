#!/bin/sh
# Kubernetes' node e2e suite (e2e_node.test of 1.37.2) on the systemd node, driving swapcri (or
# containerd 2.4.2, for comparison) through a real kubelet: the suite starts etcd and the API
# server in its own process and kubelet as a systemd unit, pointed at the runtime's socket.
# kubelet runs as a swap node does (failSwapOn false, the node's cgroup driver); the swap
# behaviour is NoSwap, the setting the suite's conformance specs require, and its LimitedSwap
# specs switch kubelet to LimitedSwap themselves. Pods get a bridge network; images come from
# the node's registry under their real names. Prints `E2E-RESULT node-e2e-<runtime>-<driver>
# PASS|FAIL <counts>`, the failures, then checks the Summary API's swap figures
# (summary-swap.sh; not in a long-form shard), and writes the reports to the third disk (/dev/vdc) as a tar.
export PATH=/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
CONF=/etc/swapcri/config.toml
T0=$(date +%s)
. /e2e/helpers.sh
IN=/e2e/node-e2e
DRIVER=$(cat $IN/driver)
RUNTIME=$(cat $IN/runtime)
WORK=/var/lib/node-e2e
REPORT=$WORK/report

write_config() { # DRIVER
  printf 'log_level = "info"\n[runtime]\ncgroup_driver = "%s"\n' "$1"
  # test-handler: the runtime handler the suite's RuntimeClass specs name (runc).
  for handler in runc test-handler; do printf '[runtime.handlers.%s]\nbinary = "/usr/local/bin/runc-new"\n' "$handler"; done
  printf '[network]\nconfig_dir = "/etc/swapcri/cni-node-e2e"\n'
  for r in registry.k8s.io gcr.io k8s.gcr.io docker.io registry-1.docker.io quay.io; do
    printf '[registries."%s"]\nmirrors = ["127.0.0.1:5000"]\n' "$r"
  done
}

# kubelet's base configuration; the suite adds its own settings (authentication, static
# pods, the read-only port) and writes the file it starts kubelet with. Pod and container
# statistics come from the runtime (PodAndContainerStatsFromCRI, beta in 1.37) unless
# CRI_STATS=false: without it kubelet takes a pod's network and process figures from
# cAdvisor's runtime plugins, which know containerd and CRI-O only; with it, kubelet 1.37
# reports no pod-level swap in /stats/summary (whatever the runtime).
write_kubelet_config() { # DRIVER CRI_STATS
  cat <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: $1
failSwapOn: false
memorySwap:
  swapBehavior: NoSwap
featureGates:
  PodAndContainerStatsFromCRI: $2
EOF
}

modprobe -a nf_tables nft_compat nft_chain_nat nf_nat nf_conntrack xt_MASQUERADE xt_mark xt_comment \
  xt_multiport xt_conntrack xt_addrtype br_netfilter 2>&1 | sed 's/^/E2E-LOG modprobe: /'
# The API server advertises the address of the default route's interface: a dummy one (the
# node has no network; nothing sent there leaves it).
modprobe dummy
ip link add node0 type dummy && ip addr add 192.0.2.10/24 dev node0 && ip link set node0 up &&
  ip route add default via 192.0.2.1 dev node0 || echo "E2E-LOG no default route: $(ip route 2>&1)"
# containerd as its own documentation sets it up for kubelet: the CRI plugin, runc through the
# v2 shim with the node's cgroup driver, the same CNI network and pause image, and each
# registry mirrored to the node's registry (hosts.toml).
start_containerd() { # DRIVER
  install -m 0755 $IN/containerd $IN/containerd-shim-runc-v2 /usr/local/bin/
  mkdir -p /etc/containerd
  systemd=false
  [ "$1" = systemd ] && systemd=true
  cat >/etc/containerd/config.toml <<EOF
version = 3
[plugins.'io.containerd.cri.v1.images']
  snapshotter = 'overlayfs'
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = 'registry.k8s.io/pause:3.10.2'
  [plugins.'io.containerd.cri.v1.images'.registry]
    config_path = '/etc/containerd/certs.d'
[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
  runtime_type = 'io.containerd.runc.v2'
  [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
    BinaryName = '/usr/local/bin/runc-new'
    SystemdCgroup = $systemd
[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.test-handler]
  runtime_type = 'io.containerd.runc.v2'
  [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.test-handler.options]
    BinaryName = '/usr/local/bin/runc-new'
    SystemdCgroup = $systemd
[plugins.'io.containerd.cri.v1.runtime'.cni]
  bin_dirs = ['/usr/lib/cni']
  conf_dir = '/etc/swapcri/cni-node-e2e'
EOF
  for r in registry.k8s.io gcr.io k8s.gcr.io docker.io quay.io; do
    mkdir -p /etc/containerd/certs.d/$r
    printf '[host."http://127.0.0.1:5000"]\n  capabilities = ["pull", "resolve"]\n' \
      >/etc/containerd/certs.d/$r/hosts.toml
  done
  cat >/etc/systemd/system/containerd.service <<EOF
[Unit]
Description=containerd container runtime
After=network.target
[Service]
ExecStartPre=-/sbin/modprobe overlay
ExecStart=/usr/local/bin/containerd
Type=notify
Delegate=yes
KillMode=process
Restart=always
LimitNOFILE=infinity
OOMScoreAdjust=-999
[Install]
WantedBy=multi-user.target
EOF
  systemctl daemon-reload
  systemctl stop swapcri.service
  systemctl start containerd.service
  i=0
  # /etc/crictl.yaml names swapcri's socket for images too.
  until out=$(crictl --runtime-endpoint $ENDPOINT --image-endpoint $ENDPOINT \
    pull registry.k8s.io/e2e-test-images/busybox:1.29-2 2>&1); do
    i=$((i + 1))
    if [ $i -ge 120 ]; then
      echo "E2E-RESULT containerd-registry FAIL containerd did not pull through the node's registry in 120 s: $out"
      journalctl -u containerd.service --no-pager -o cat | tail -n 10 | sed 's/^/E2E-LOG containerd: /'
      return 1
    fi
    sleep 1
  done
}

docker-registry serve /e2e/registry.yml >/tmp/registry.log 2>&1 &
registry=$!
if [ "$RUNTIME" = containerd ]; then
  ENDPOINT=unix:///run/containerd/containerd.sock
  start_containerd "$DRIVER" || exit 1 # no suite against a runtime that cannot pull
else
  ENDPOINT=unix:///run/swapcri/swapcri.sock
  write_config "$DRIVER" >$CONF
  systemctl restart swapcri.service
  mirror_up || true
fi
mkdir -p $WORK $REPORT
write_kubelet_config "$DRIVER" "$(cat $IN/cri_stats)" >$WORK/kubelet-base.yaml
note "node e2e: $RUNTIME with the $DRIVER driver, $(cat $IN/procs) process(es); focus: $(cut -c1-300 $IN/focus); skip: $(cat $IN/skip)"
cd $WORK
t0=$(date +%s)
# The feature gate goes to the suite too: it gives kubelet its gates, and specs skip or adapt
# by the suite's own view of them (/metrics/cadvisor's figures come from the runtime with it).
set -- --container-runtime-endpoint $ENDPOINT --image-service-endpoint $ENDPOINT \
  --kubelet-config-file $WORK/kubelet-base.yaml --prepull-images=false \
  --feature-gates "PodAndContainerStatsFromCRI=$(cat $IN/cri_stats)" \
  --kubelet-flags=--runtime-cgroups=/system.slice/$RUNTIME.service \
  --node-name swapcri-node --report-dir $REPORT
procs=$(cat $IN/procs 2>/dev/null || echo 1)
# A progress line on the console every 10 minutes: the specs ginkgo has reported so far.
(while sleep 600; do
  echo "E2E-LOG node e2e: $(($(date +%s) - t0)) s, $(grep -o '•' $REPORT/e2e_node.log 2>/dev/null | wc -l) specs done"
done) &
progress=$!
if [ "$procs" -gt 1 ]; then
  # ginkgo's runner: process 1 starts the services and hands the others its bearer token;
  # [Serial] specs run alone after the rest.
  timeout --kill-after=60 "$(cat $IN/timeout)" $IN/ginkgo --procs "$procs" \
    --focus "$(cat $IN/focus)" --skip "$(cat $IN/skip)" --no-color \
    --timeout "$(($(cat $IN/timeout) - 120))s" --output-dir $REPORT \
    --junit-report junit.xml --json-report report.json \
    $IN/e2e_node.test -- "$@" >$REPORT/e2e_node.log 2>&1
else
  timeout --kill-after=60 "$(cat $IN/timeout)" $IN/e2e_node.test "$@" \
    --ginkgo.focus "$(cat $IN/focus)" --ginkgo.skip "$(cat $IN/skip)" --ginkgo.no-color \
    --ginkgo.timeout "$(($(cat $IN/timeout) - 120))s" \
    --ginkgo.junit-report $REPORT/junit.xml --ginkgo.json-report $REPORT/report.json \
    >$REPORT/e2e_node.log 2>&1
fi
status=$?
kill $progress 2>/dev/null
took=$(($(date +%s) - t0))
python3 /e2e/summary.py $REPORT/report.json $status $took >$REPORT/summary.txt
set -- $(grep -m1 '^TOTAL' $REPORT/summary.txt)
passed=$4 failed=$6 selfskipped=$(grep -m1 '^SELF-SKIPPED' $REPORT/summary.txt | cut -d' ' -f2)
counts="node-e2e: $RUNTIME $DRIVER: $passed passed, $failed failed, ${selfskipped:-0} skipped"
if [ "$failed" = 0 ] && [ "$status" = 0 ]; then
  echo "E2E-RESULT node-e2e-$RUNTIME-$DRIVER PASS $counts in $took s"
else
  echo "E2E-RESULT node-e2e-$RUNTIME-$DRIVER FAIL $counts in $took s (e2e_node.test exit $status)"
  journalctl -u $RUNTIME.service --no-pager -o cat | grep -E ' (WARN|ERROR) ' | tail -n 30 | sed "s/^/E2E-LOG $RUNTIME: /"
  tail -n 40 $REPORT/e2e_node.log | cut -c1-300 | sed 's/^/E2E-LOG e2e_node: /'
fi
sed -n '/^FAILED:/,$p' $REPORT/summary.txt | sed "s/^/E2E-LOG $DRIVER: /"
# The long form's shards leave it out: the short and standard forms check it once per run.
if [ "$(cat $IN/summary_swap 2>/dev/null)" != false ]; then
  sh /e2e/summary-swap.sh "$RUNTIME" "$DRIVER" "$ENDPOINT" | tee $REPORT/summary-swap.txt
  for log in kubelet services; do
    cp /var/lib/summary-swap/$log.log $REPORT/summary-swap-$log.log 2>/dev/null
  done
fi
cp /var/log/syslog $REPORT/ 2>/dev/null
journalctl -u $RUNTIME.service --no-pager -o short-precise >$REPORT/$RUNTIME.log 2>&1
kill $registry 2>/dev/null
tar -C $WORK -cf /dev/vdc report && echo "E2E-LOG reports written to the report disk"
