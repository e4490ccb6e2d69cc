#!/bin/sh
# critest's basic and pod specs, as many times as /e2e/critest-runs says, on the systemd
# node with the systemd cgroup driver, both vCPUs kept busy by spinning loops meanwhile.
# Prints `E2E-RESULT critest-soak-<n> PASS|FAIL <ginkgo's Ran line>` per run.
export PATH=/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
CONF=/etc/swapcri/config.toml
T0=$(date +%s)
. /e2e/helpers.sh
runs=$(cat /e2e/critest-runs)
# Pods get a bridge network of their own here (the node's default is loopback only): the
# pod metrics spec wants each pod's interface counters.
mkdir -p /etc/swapcri/cni-critest
cat >/etc/swapcri/cni-critest/10-critest.conflist <<'JSON'
{"cniVersion": "1.0.0", "name": "critest", "plugins": [{"type": "bridge", "bridge": "critest0",
 "isGateway": true, "ipMasq": false, "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.89.0.0/16"}]]}}]}
JSON
{
  printf 'log_level = "info"\n[runtime]\ncgroup_driver = "systemd"\n'
  printf '[network]\nconfig_dir = "/etc/swapcri/cni-critest"\n'
  for r in registry.k8s.io gcr.io k8s.gcr.io docker.io registry-1.docker.io quay.io public.ecr.aws; do
    printf '[registries."%s"]\nmirrors = ["127.0.0.1:5000"]\n' "$r"
  done
} >$CONF
systemctl restart swapcri.service
docker-registry serve /e2e/registry.yml >/tmp/registry.log 2>&1 &
registry=$!
mirror_up
spinners=""
for _ in 1 2; do
  sh -c 'while :; do :; done' &
  spinners="$spinners $!"
done
i=1
while [ "$i" -le "$runs" ]; do
  t0=$(date +%s)
  TMPDIR=/tmp critest -runtime-endpoint unix:///run/swapcri/swapcri.sock \
    -image-endpoint unix:///run/swapcri/swapcri.sock -ginkgo.no-color \
    -ginkgo.focus 'basic operations|PodSandbox' -ginkgo.skip 'public image with digest' \
    >/tmp/critest-$i.log 2>&1
  status=$?
  ran=$(grep -m1 '^Ran ' /tmp/critest-$i.log)
  if [ "$status" = 0 ]; then
    echo "E2E-RESULT critest-soak-$i PASS $ran in $(($(date +%s) - t0)) s (vCPUs busy)"
  else
    echo "E2E-RESULT critest-soak-$i FAIL $ran (status $status)"
    grep -A6 '\[FAIL\]' /tmp/critest-$i.log | head -n 40 | sed 's/^/E2E-LOG /'
    grep -A3 '\[FAILED\]' /tmp/critest-$i.log | head -n 40 | sed 's/^/E2E-LOG /'
    journalctl -u swapcri.service --no-pager -o cat | grep -E ' (WARN|ERROR) ' | tail -n 20 | sed 's/^/E2E-LOG swapcri: /'
  fi
  i=$((i + 1))
done
kill $spinners $registry 2>/dev/null
