package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCreateBundle(t *testing.T) {
	for _, c := range []struct {
		args   string
		bundle string
		ok     bool
	}{
		{"--root /r create --bundle /b --pid-file /p id", "/b", true},
		{"--root /r --log /l create -b /b id", "/b", true},
		{"create --bundle=/b id", "/b", true},
		{"create id", ".", true},
		{"run --bundle /b id", "/b", true},
		{"start id", "", false},
		{"--root /r state id", "", false},
		{"delete --force id", "", false},
		{"create --bundle", ".", true},
	} {
		bundle, ok := createBundle(strings.Fields(c.args))
		if bundle != c.bundle || ok != c.ok {
			t.Errorf("%q: got (%q, %v), want (%q, %v)", c.args, bundle, ok, c.bundle, c.ok)
		}
	}
}

func TestClamp(t *testing.T) {
	own, err := ownScore()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		config string
		want   any // process.oomScoreAdj after, nil: absent
	}{
		{"below is raised", `{"process":{"oomScoreAdj":-1001,"args":["x"]},"n":12345678901234567890}`, float64(own)},
		{"at or above stays", `{"process":{"oomScoreAdj":1000}}`, float64(1000)},
		{"absent stays absent", `{"process":{"args":["x"]}}`, nil},
		{"no process", `{"ociVersion":"1.2.0"}`, nil},
	} {
		path := filepath.Join(t.TempDir(), "config.json")
		if err := os.WriteFile(path, []byte(c.config), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := clamp(path); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		raw, _ := os.ReadFile(path)
		var spec struct {
			Process map[string]any `json:"process"`
		}
		if err := json.Unmarshal(raw, &spec); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := spec.Process["oomScoreAdj"]; got != c.want {
			t.Errorf("%s: oomScoreAdj %v, want %v (%s)", c.name, got, c.want, raw)
		}
		if strings.Contains(c.config, "12345678901234567890") && !strings.Contains(string(raw), "12345678901234567890") {
			t.Errorf("%s: other fields changed: %s", c.name, raw)
		}
	}
	if err := clamp(filepath.Join(t.TempDir(), "missing.json")); err == nil {
		t.Error("a missing config.json is an error")
	}
}
