// oomclamp runs runc for CRI-O on a node where root lacks CAP_SYS_RESOURCE (a container, a
// restricted VM): there runc cannot lower a process's oom_score_adj, and CRI-O asks it to for
// every pod's infra container (-998). Before `runc create`, it raises the bundle's
// process.oomScoreAdj to this process's own, as containerd's restrict_oom_score_adj and
// swapcri do; every other command goes to runc untouched.
//
// CRI-O's runtime_path takes no arguments, so the runc it runs is found beside the path it
// was started as: PATH.real (a symlink to runc).
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

func main() {
	runc, args := os.Args[0]+".real", os.Args[1:]
	if bundle, ok := createBundle(args); ok {
		if err := clamp(filepath.Join(bundle, "config.json")); err != nil {
			fmt.Fprintf(os.Stderr, "oomclamp: %v\n", err)
			os.Exit(1)
		}
	}
	err := syscall.Exec(runc, append([]string{runc}, args...), os.Environ())
	fmt.Fprintf(os.Stderr, "oomclamp: exec %s: %v\n", runc, err)
	os.Exit(1)
}

// createBundle: the bundle of a `create` (or `run`) command; runc's default is the working
// directory.
func createBundle(args []string) (string, bool) {
	cmd := -1
	for i, a := range args {
		if a == "create" || a == "run" {
			cmd = i
			break
		}
	}
	if cmd < 0 {
		return "", false
	}
	for i := cmd + 1; i < len(args); i++ {
		a := args[i]
		switch {
		case (a == "--bundle" || a == "-b") && i+1 < len(args):
			return args[i+1], true
		case strings.HasPrefix(a, "--bundle="):
			return strings.TrimPrefix(a, "--bundle="), true
		}
	}
	return ".", true
}

// clamp raises process.oomScoreAdj in the bundle's config to this process's own.
func clamp(path string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	own, err := ownScore()
	if err != nil {
		return err
	}
	var spec map[string]json.RawMessage
	if err := json.Unmarshal(raw, &spec); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	var process map[string]json.RawMessage
	if err := json.Unmarshal(spec["process"], &process); err != nil || process["oomScoreAdj"] == nil {
		return nil
	}
	var score int
	if err := json.Unmarshal(process["oomScoreAdj"], &score); err != nil || score >= own {
		return nil
	}
	process["oomScoreAdj"] = json.RawMessage(strconv.Itoa(own))
	if spec["process"], err = json.Marshal(process); err != nil {
		return err
	}
	out, err := json.Marshal(spec)
	if err != nil {
		return err
	}
	tmp := path + ".oomclamp"
	if err := os.WriteFile(tmp, out, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func ownScore() (int, error) {
	raw, err := os.ReadFile("/proc/self/oom_score_adj")
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(string(bytes.TrimSpace(raw)))
}
