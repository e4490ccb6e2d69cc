#!/bin/sh
# The whole CRI validation suite on the systemd node (cgroup v2 with swap), once per cgroup
# driver: systemd, then cgroupfs. runc 1.4.3 is the handler (user namespaces need its
# id-mapped mounts); NRI is served so the NRI specs run; pods get a bridge with host ports.
# Prints `E2E-RESULT critest-<driver> PASS|FAIL <counts>`, each failure and each spec that
# skipped itself as E2E-LOG lines.
export PATH=/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
CONF=/etc/swapcri/config.toml
T0=$(date +%s)
. /e2e/helpers.sh
# The pods' network (a bridge with host ports) was written into the node by systemd-node.sh.
CNI=/etc/swapcri/cni-critest

write_config() { # DRIVER
  printf 'log_level = "info"\n[runtime]\ncgroup_driver = "%s"\n' "$1"
  printf '[runtime.handlers.runc]\nbinary = "/usr/local/bin/runc-new"\n'
  printf '[network]\nconfig_dir = "%s"\n' "$CNI"
  printf '[nri]\nenable = true\nsocket_path = "/run/swapcri/nri.sock"\nplugin_path = "/run/swapcri/nri-plugins"\n'
  for r in registry.k8s.io gcr.io k8s.gcr.io docker.io registry-1.docker.io quay.io public.ecr.aws; do
    printf '[registries."%s"]\nmirrors = ["127.0.0.1:5000"]\n' "$r"
  done
}

# Host ports need iptables' nft backend: its modules, loaded as on a node with kube-proxy.
modprobe -a nf_tables nft_compat nft_chain_nat nf_nat nf_conntrack xt_MASQUERADE xt_mark xt_comment \
  xt_multiport xt_conntrack xt_addrtype 2>&1 | sed 's/^/E2E-LOG modprobe: /'
echo "E2E-LOG $(iptables -V 2>&1); nat table: $(iptables -t nat -S 2>&1 | head -n 1)"
echo "E2E-LOG AppArmor enabled: $(cat /sys/module/apparmor/parameters/enabled 2>&1); $(command -v apparmor_parser)"
docker-registry serve /e2e/registry.yml >/tmp/registry.log 2>&1 &
registry=$!
for driver in systemd cgroupfs; do
  write_config $driver >$CONF
  systemctl restart swapcri.service
  mirror_up
  out=/tmp/critest-$driver
  mkdir -p $out
  t0=$(date +%s)
  TMPDIR=/tmp timeout --kill-after=60 5400 critest -runtime-endpoint unix:///run/swapcri/swapcri.sock \
    -image-endpoint unix:///run/swapcri/swapcri.sock -ginkgo.no-color -ginkgo.timeout 85m \
    -ginkgo.skip 'public image with digest should be pulled and removed' \
    -nri-socket /run/swapcri/nri.sock -ginkgo.json-report $out/report.json >$out/critest.log 2>&1
  status=$?
  took=$(($(date +%s) - t0))
  python3 /e2e/summary.py $out/report.json $status $took >$out/summary.txt
  counts=$(grep -m1 '^TOTAL' $out/summary.txt)
  if grep -qE '^TOTAL .* FAILED 0 ' $out/summary.txt && [ "$status" = 0 ]; then
    echo "E2E-RESULT critest-$driver PASS $counts in $took s"
  else
    echo "E2E-RESULT critest-$driver FAIL $counts in $took s (critest exit $status)"
    journalctl -u swapcri.service --no-pager -o cat | grep -E ' (WARN|ERROR) ' | tail -n 30 | sed 's/^/E2E-LOG swapcri: /'
    grep -m 5 'level=warning' $out/critest.log | cut -c1-300 | sed 's/^/E2E-LOG critest: /'
  fi
  sed -n '/^FAILED:/,$p' $out/summary.txt | sed "s/^/E2E-LOG $driver: /"
done
kill $registry 2>/dev/null
