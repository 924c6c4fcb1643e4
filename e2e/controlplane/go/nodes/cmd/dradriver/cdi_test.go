package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"draxr.invalid/e2e/controlplane/nodes/internal/cdi"
)

func TestCDISpecNamesEachDeviceInAnEnvVar(t *testing.T) {
	dir := t.TempDir()
	results := []resourceapi.DeviceRequestAllocationResult{
		{Request: "r", Driver: "gpu.example.com", Pool: "node-a", Device: "gpu-0"},
		{Request: "r", Driver: "gpu.example.com", Pool: "node-a", Device: "big-gpu-1", ShareID: ptr.To(types.UID("s1"))},
	}
	if err := writeCDISpec(dir, "draxr.e2e/gpu", "gpu.example.com", "uid-1", results); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "gpu.example.com-uid-1.json"))
	if err != nil {
		t.Fatal(err)
	}
	var spec cdi.Spec
	if err := json.Unmarshal(raw, &spec); err != nil {
		t.Fatal(err)
	}
	if spec.Kind != "draxr.e2e/gpu" || len(spec.Devices) != 2 {
		t.Fatalf("spec: %+v", spec)
	}
	want := map[string]string{
		"node-a-gpu-0":        "DRA_DEVICE_GPU_0=gpu.example.com/node-a/gpu-0",
		"node-a-big-gpu-1-s1": "DRA_DEVICE_BIG_GPU_1=gpu.example.com/node-a/big-gpu-1",
	}
	for _, d := range spec.Devices {
		if len(d.ContainerEdits.Env) != 1 || want[d.Name] != d.ContainerEdits.Env[0] {
			t.Errorf("device %s: env %v, want [%s]", d.Name, d.ContainerEdits.Env, want[d.Name])
		}
	}
	if err := removeCDISpec(dir, "gpu.example.com", "uid-1"); err != nil {
		t.Fatal(err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("left after removal: %v", left)
	}
	if err := removeCDISpec(dir, "gpu.example.com", "uid-1"); err != nil {
		t.Errorf("removing twice: %v", err)
	}
}
