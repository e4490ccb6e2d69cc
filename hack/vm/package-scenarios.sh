#!/bin/sh
# The Debian package on the systemd node, as an operator handles it:
#   package-scenarios.sh install   dpkg -i of /e2e/pkg/first.deb: enabled, started, crictl answers
#   package-scenarios.sh upgrade   with a container running: dpkg -i of /e2e/pkg/next.deb restarts
#                                  the daemon and keeps it; apt-get remove stops the daemon and
#                                  leaves it and the state; installing again finds it
# Prints `E2E-RESULT package-<name> PASS|FAIL <details>`.
export PATH=/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive
CONF=/etc/swapcri/config.toml
C="swapcri --config $CONF"
T0=$(date +%s)
. /e2e/helpers.sh

main_pid() { systemctl show -p MainPID --value swapcri.service; }
installed_version() { dpkg-query -W -f '${Version} ${db:Status-Abbrev}' swapcri 2>/dev/null | tr -s ' '; }
# answers: crictl reaches the daemon (it may still be starting after a restart).
answers() {
  i=0
  until crictl version >/tmp/crictl-version 2>&1; do
    i=$((i + 1))
    [ $i -ge 60 ] && return 1
    sleep 1
  done
}
state_of() { crictl inspect "$1" 2>/dev/null | tr -d ' \n' | grep -o '"state":"[A-Z_]*"' | head -n 1 | cut -d'"' -f4; }

install_phase() {
  FIRST=$(dpkg-deb -f /e2e/pkg/first.deb Version)
  dpkg -i /e2e/pkg/first.deb </dev/null >/tmp/dpkg-install.log 2>&1
  status=$?
  check package-install '[ "$status" = 0 ] && [ "$(installed_version)" = "$FIRST ii " ]' \
    "dpkg -i swapcri $FIRST: exit $status, installed '$(installed_version)'; $(tail -n 2 /tmp/dpkg-install.log | tr '\n' ' ')"
  answers
  check package-service-up '[ "$(systemctl is-enabled swapcri.service)" = enabled ] && [ "$(systemctl is-active swapcri.service)" = active ] && grep -q "RuntimeName: *swapcri" /tmp/crictl-version' \
    "swapcri.service $(systemctl is-enabled swapcri.service), $(systemctl is-active swapcri.service); crictl version: $(tr '\n' ' ' </tmp/crictl-version)"
  CONFFILES=$(dpkg-query -W -f '${Conffiles}' swapcri | awk '{ print $1 }' | tr '\n' ' ')
  check package-files '[ "$CONFFILES" = "/etc/swapcri/config.toml " ] && grep -q "^cgroup_driver = \"systemd\"" $CONF && [ -f /usr/share/man/man8/swapcri.8.gz ] && [ -f /usr/share/bash-completion/completions/swapcri ] && [ "$(systemctl is-enabled swapcri.socket)" = disabled ]' \
    "conffiles: $CONFFILES; $(grep '^cgroup_driver' $CONF); man pages: $(ls /usr/share/man/man8 | grep -c swapcri); swapcri.socket $(systemctl is-enabled swapcri.socket)"
}

upgrade_phase() {
  NEXT=$(dpkg-deb -f /e2e/pkg/next.deb Version)
  $C image import /images/busybox.tar >/dev/null
  P=$($C client runp pkg)
  K=$($C client create "$P" app localhost/busybox:latest -- sleep 100000)
  $C client start "$K" >/dev/null
  KPIDS=$(cat "$(cg "$K")/cgroup.procs" | tr '\n' ' ')
  PID0=$(main_pid) SUM0=$(md5sum <$CONF)
  dpkg -i /e2e/pkg/next.deb </dev/null >/tmp/dpkg-upgrade.log 2>&1
  status=$?
  answers
  PID1=$(main_pid) KPIDS1=$(cat "$(cg "$K")/cgroup.procs" | tr '\n' ' ')
  check package-upgrade '[ "$status" = 0 ] && [ "$(installed_version)" = "$NEXT ii " ] && [ "$PID1" != "$PID0" ] && [ "$PID1" != 0 ]' \
    "dpkg -i swapcri $NEXT: exit $status, installed '$(installed_version)', daemon pid $PID0 -> $PID1"
  check package-upgrade-keeps-containers '[ "$KPIDS" = "$KPIDS1" ] && [ "$(state_of "$K")" = CONTAINER_RUNNING ] && [ "$(md5sum <$CONF)" = "$SUM0" ]' \
    "container processes '$KPIDS' -> '$KPIDS1', crictl: $(state_of "$K"); edited configuration kept: $([ "$(md5sum <$CONF)" = "$SUM0" ] && echo yes || echo no)"
  apt-get remove -y swapcri </dev/null >/tmp/apt-remove.log 2>&1
  status=$?
  ALIVE=0
  for p in $KPIDS; do kill -0 "$p" 2>/dev/null && ALIVE=$((ALIVE + 1)); done
  RECORDS=$(find /var/lib/swapcri -name "*$K*" 2>/dev/null | wc -l)
  check package-remove-leaves-containers '[ "$status" = 0 ] && [ "$(systemctl is-active swapcri.service)" != active ] && [ ! -e /usr/bin/swapcri ] && [ "$ALIVE" = "$(echo $KPIDS | wc -w)" ] && [ "$RECORDS" -gt 0 ] && [ -f $CONF ]' \
    "apt-get remove: exit $status, '$(installed_version)', swapcri.service $(systemctl is-active swapcri.service); $ALIVE of $(echo $KPIDS | wc -w) container processes alive, $RECORDS state entries of it in /var/lib/swapcri, configuration $([ -f $CONF ] && echo kept || echo gone)"
  dpkg -i /e2e/pkg/next.deb </dev/null >/tmp/dpkg-again.log 2>&1
  answers
  check package-reinstall-finds-containers '[ "$(state_of "$K")" = CONTAINER_RUNNING ] && [ "$(cat "$(cg "$K")/cgroup.procs" | tr "\n" " ")" = "$KPIDS" ]' \
    "installed again: '$(installed_version)', crictl: $(state_of "$K"), processes $(cat "$(cg "$K")/cgroup.procs" | tr '\n' ' ')"
  $C client rmp "$P" >/dev/null
}

case ${1:-} in
  install) install_phase ;;
  upgrade) upgrade_phase ;;
  *) echo "usage: $0 install|upgrade" >&2; exit 2 ;;
esac
