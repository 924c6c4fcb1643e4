package main

import (
	"encoding/json"
	"os"
	"testing"

	"draxr.invalid/e2e/controlplane/nodes/internal/cdi"
)

func TestCDISpecResolvesEveryIDAllocateHandsOut(t *testing.T) {
	dir := t.TempDir()
	p := &plugin{node: "node-b", cdiKind: "draxr.e2e/dp-gpu"}
	if err := writeCDISpec(dir, p.cdiKind, "example.com/gpu", p.node, []string{"dp-gpu-0", "dp-gpu-1"}); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(cdiPath(dir, "node-b"))
	if err != nil {
		t.Fatal(err)
	}
	var spec cdi.Spec
	if err := json.Unmarshal(raw, &spec); err != nil {
		t.Fatal(err)
	}
	names := map[string]string{}
	for _, d := range spec.Devices {
		names[spec.Kind+"="+d.Name] = d.ContainerEdits.Env[0]
	}
	// The IDs Allocate hands the kubelet are exactly the spec's devices.
	for id, env := range map[string]string{
		"dp-gpu-0": "DEVICE_PLUGIN_DP_GPU_0=example.com/gpu/node-b/dp-gpu-0",
		"dp-gpu-1": "DEVICE_PLUGIN_DP_GPU_1=example.com/gpu/node-b/dp-gpu-1",
	} {
		cdiID := p.cdiKind + "=" + p.node + "-" + id
		if names[cdiID] != env {
			t.Errorf("%s: %q, want %q (spec %+v)", cdiID, names[cdiID], env, spec)
		}
	}
	if len(spec.Devices) != 2 {
		t.Errorf("devices: %+v", spec.Devices)
	}
}
