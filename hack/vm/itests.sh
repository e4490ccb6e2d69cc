#!/bin/sh
# Inside the VM: the repository's root integration tests (built on the host, copied in by
# e2e.sh) on this cgroup v2 node with swap. One E2E-RESULT line per test binary.
# runc 1.4.3, copied in by e2e.sh, for the tests that compare handlers.
[ -x /usr/local/bin/runc-new ] && export SWAPCRI_TEST_RUNC_NEW=/usr/local/bin/runc-new
# CRIU 4.1.1, copied in by e2e.sh: what this kernel lets it do (`criu check`, and the
# features `criu check --all` finds missing), then the checkpoint tests.
if [ -x /usr/local/sbin/criu ]; then
  export SWAPCRI_TEST_CRIU=/usr/local/sbin/criu
  if check=$(/usr/local/sbin/criu check 2>&1); then result=PASS; else result=FAIL; fi
  missing=$(/usr/local/sbin/criu check --all 2>&1 | grep -a '^Warn' | sed 's/^Warn *([^)]*): *//' | tr '\n' ';' | sed 's/;$//')
  echo "E2E-RESULT criu-check $result $(uname -r): $(echo "$check" | tail -n 1) (check --all: ${missing:-nothing missing})"
  [ $result = PASS ] || echo "$check" | tail -n 5 | sed 's/^/E2E-LOG   /'
fi
# Plain emulation (TCG) runs a process start or a runc call ten or more times slower than
# hardware: the time bounds of the tests are stretched by this much here.
export SWAPCRI_TEST_TIME_SCALE=10
for t in /e2e/itests/*; do
  case $t in *.filter) continue ;; esac
  [ -x "$t" ] || continue
  name=$(basename "$t")
  out=/tmp/itest-$name.log
  started=$(date +%s)
  filter=$(cat "$t.filter" 2>/dev/null || true)
  # --nocapture: the figures tests print ("measured: …") reach the log even when they pass.
  "$t" --test-threads=1 --nocapture $filter >"$out" 2>&1
  took=$(($(date +%s) - started))
  line=$(grep -a '^test result:' "$out" | tail -n 1)
  case $line in
    "test result: ok."*)
      echo "E2E-RESULT itest-$name PASS ${line#test result: } (${took} s)"
      grep -a -o 'measured: .*' "$out" | sed 's/^/E2E-LOG   /'
      ;;
    *)
      echo "E2E-RESULT itest-$name FAIL ${line:-no test result} (${took} s)"
      # A panic's message is on the line after "panicked at".
      grep -a -E -A 1 'panicked|assert|FAILED|error' "$out" | grep -av '^--$' | head -n 30 | sed 's/^/E2E-LOG   /'
      ;;
  esac
done
