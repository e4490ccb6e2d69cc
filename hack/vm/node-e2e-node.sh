#!/bin/sh
# Kubernetes' node e2e suite (e2e_node.test of 1.37.2) on the systemd node, driving swapcri
# through a real kubelet: the suite starts etcd and the API server in its own process and
# kubelet as a systemd unit, pointed at swapcri's socket. kubelet runs as a swap node does
# (failSwapOn false, the node's cgroup driver); the swap behaviour is NoSwap, the setting the
# suite's conformance specs require, and its LimitedSwap specs switch kubelet to LimitedSwap
# themselves. Pods get a bridge network; images come from the node's registry under their
# real names. Prints `E2E-RESULT node-e2e-swapcri-<driver> PASS|FAIL <counts>`, the
# failures, and writes the reports to the third disk (/dev/vdc) as a tar.
export PATH=/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
CONF=/etc/swapcri/config.toml
T0=$(date +%s)
. /e2e/helpers.sh
IN=/e2e/node-e2e
DRIVER=$(cat $IN/driver)
WORK=/var/lib/node-e2e
REPORT=$WORK/report

write_config() { # DRIVER
  printf 'log_level = "info"\n[runtime]\ncgroup_driver = "%s"\n' "$1"
  printf '[runtime.handlers.runc]\nbinary = "/usr/local/bin/runc-new"\n'
  printf '[network]\nconfig_dir = "/etc/swapcri/cni-node-e2e"\n'
  for r in registry.k8s.io gcr.io k8s.gcr.io docker.io registry-1.docker.io quay.io; do
    printf '[registries."%s"]\nmirrors = ["127.0.0.1:5000"]\n' "$r"
  done
}

# kubelet's base configuration; the suite adds its own settings (authentication, static
# pods, the read-only port) and writes the file it starts kubelet with. Pod and container
# statistics come from the runtime (PodAndContainerStatsFromCRI, beta in 1.37): without it
# kubelet takes a pod's network and process figures from cAdvisor's runtime plugins, which
# know containerd and CRI-O only.
write_kubelet_config() { # DRIVER
  cat <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: $1
failSwapOn: false
memorySwap:
  swapBehavior: NoSwap
featureGates:
  PodAndContainerStatsFromCRI: true
EOF
}

modprobe -a nf_tables nft_compat nft_chain_nat nf_nat nf_conntrack xt_MASQUERADE xt_mark xt_comment \
  xt_multiport xt_conntrack xt_addrtype br_netfilter 2>&1 | sed 's/^/E2E-LOG modprobe: /'
# The API server advertises the address of the default route's interface: a dummy one (the
# node has no network; nothing sent there leaves it).
modprobe dummy
ip link add node0 type dummy && ip addr add 192.0.2.10/24 dev node0 && ip link set node0 up &&
  ip route add default via 192.0.2.1 dev node0 || echo "E2E-LOG no default route: $(ip route 2>&1)"
docker-registry serve /e2e/registry.yml >/tmp/registry.log 2>&1 &
registry=$!
write_config "$DRIVER" >$CONF
systemctl restart swapcri.service
mirror_up || true
mkdir -p $WORK $REPORT
write_kubelet_config "$DRIVER" >$WORK/kubelet-base.yaml
note "node e2e: swapcri with the $DRIVER driver; focus: $(cat $IN/focus); skip: $(cat $IN/skip)"
cd $WORK
t0=$(date +%s)
timeout --kill-after=60 "$(cat $IN/timeout)" $IN/e2e_node.test \
  --container-runtime-endpoint unix:///run/swapcri/swapcri.sock \
  --image-service-endpoint unix:///run/swapcri/swapcri.sock \
  --kubelet-config-file $WORK/kubelet-base.yaml --prepull-images=false \
  --kubelet-flags=--runtime-cgroups=/system.slice/swapcri.service \
  --node-name swapcri-node --report-dir $REPORT \
  --ginkgo.focus "$(cat $IN/focus)" --ginkgo.skip "$(cat $IN/skip)" --ginkgo.no-color \
  --ginkgo.timeout "$(($(cat $IN/timeout) - 120))s" \
  --ginkgo.junit-report $REPORT/junit.xml --ginkgo.json-report $REPORT/report.json \
  >$REPORT/e2e_node.log 2>&1
status=$?
took=$(($(date +%s) - t0))
python3 /e2e/summary.py $REPORT/report.json $status $took >$REPORT/summary.txt
set -- $(grep -m1 '^TOTAL' $REPORT/summary.txt)
passed=$4 failed=$6 selfskipped=$(grep -m1 '^SELF-SKIPPED' $REPORT/summary.txt | cut -d' ' -f2)
counts="node-e2e: swapcri $DRIVER: $passed passed, $failed failed, ${selfskipped:-0} skipped"
if [ "$failed" = 0 ] && [ "$status" = 0 ]; then
  echo "E2E-RESULT node-e2e-swapcri-$DRIVER PASS $counts in $took s"
else
  echo "E2E-RESULT node-e2e-swapcri-$DRIVER FAIL $counts in $took s (e2e_node.test exit $status)"
  journalctl -u swapcri.service --no-pager -o cat | grep -E ' (WARN|ERROR) ' | tail -n 30 | sed 's/^/E2E-LOG swapcri: /'
  tail -n 40 $REPORT/e2e_node.log | cut -c1-300 | sed 's/^/E2E-LOG e2e_node: /'
fi
sed -n '/^FAILED:/,$p' $REPORT/summary.txt | sed "s/^/E2E-LOG $DRIVER: /"
cp /var/log/syslog $REPORT/ 2>/dev/null
journalctl -u swapcri.service --no-pager -o short-precise >$REPORT/swapcri.log 2>&1
kill $registry 2>/dev/null
tar -C $WORK -cf /dev/vdc report && echo "E2E-LOG reports written to the report disk"
