#!/bin/sh
# Run once at image build time (Dockerfile): swapcri replaces containerd in a kind node.
set -eu
# The images kind preloaded into containerd's store move into swapcri's (the preloaded
# control-plane images: a node without registry access starts from them).
if command -v containerd >/dev/null && command -v ctr >/dev/null && [ -d /var/lib/containerd ]; then
  containerd >/tmp/containerd.log 2>&1 &
  pid=$!
  i=0
  until ctr version >/dev/null 2>&1 || [ $i -ge 100 ]; do sleep 0.1; i=$((i + 1)); done
  # Named images only: not bare digests, nor the import-DATE@sha256:… aliases that
  # `ctr images import --digests` records beside each name.
  images=$(ctr -n k8s.io images ls -q | grep -v -e '^sha256:' -e '^import-[0-9-]*@sha256:' || true)
  if [ -n "$images" ]; then
    # shellcheck disable=SC2086 # one argument per image
    ctr -n k8s.io images export --platform "linux/$(uname -m | sed 's/x86_64/amd64/;s/aarch64/arm64/')" /tmp/preloaded.tar $images
    swapcri --config /etc/swapcri/config.toml image import /tmp/preloaded.tar
    rm -f /tmp/preloaded.tar
  fi
  kill $pid
  wait $pid 2>/dev/null || true
  rm -rf /var/lib/containerd
fi
# containerd stays installed but never starts; kubelet's runtime cgroup is swapcri's unit.
systemctl disable containerd.service 2>/dev/null || true
systemctl mask containerd.service 2>/dev/null || true
systemctl enable swapcri.service
if [ -f /etc/default/kubelet ]; then
  sed -i 's|--runtime-cgroups=/system.slice/containerd.service|--runtime-cgroups=/system.slice/swapcri.service|' /etc/default/kubelet
fi
# kubelet's drop-in orders it after the runtime it talks to.
mkdir -p /etc/systemd/system/kubelet.service.d
printf '[Unit]\nAfter=swapcri.service\nWants=swapcri.service\n' >/etc/systemd/system/kubelet.service.d/20-swapcri.conf
