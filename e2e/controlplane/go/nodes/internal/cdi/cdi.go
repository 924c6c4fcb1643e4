// Package cdi writes the CDI spec files (container-device-interface SPEC.md) of draxr's e2e node
// parts: each device's only edit is one environment variable naming it, so a container running
// `env` shows exactly the devices a real runtime applied to it.
package cdi

import (
	"encoding/json"
	"os"
	"path/filepath"
)

// Spec is the part of a CDI spec file the node parts write.
type Spec struct {
	Version string   `json:"cdiVersion"`
	Kind    string   `json:"kind"`
	Devices []Device `json:"devices"`
}

// Device is one device of a spec and its edits.
type Device struct {
	Name           string `json:"name"`
	ContainerEdits Edits  `json:"containerEdits"`
}

// Edits are a device's container edits: environment variables only.
type Edits struct {
	Env []string `json:"env"`
}

// NewSpec is an empty spec of kind ("vendor/class").
func NewSpec(kind string) Spec {
	return Spec{Version: "0.6.0", Kind: kind}
}

// Add appends a device whose only edit is env.
func (s *Spec) Add(name, env string) {
	s.Devices = append(s.Devices, Device{Name: name, ContainerEdits: Edits{Env: []string{env}}})
}

// Write writes the spec to path atomically (a temporary name the CDI cache ignores, then a
// rename), so the runtime's cache never reads half a file.
func (s Spec) Write(path string) error {
	raw, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(raw, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
