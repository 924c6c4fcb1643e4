package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// The CDI spec of the plugin's devices (container-device-interface SPEC.md): on a node with a real
// container runtime the CDI device IDs Allocate hands the kubelet must resolve, or the runtime
// refuses to create the container. Each device's only edit is DEVICE_PLUGIN_<ID>=<resource>/<node>/<id>,
// so a container running `env` shows which device-plugin GPUs it got, apart from DRA's DRA_DEVICE_.
type cdiSpec struct {
	Version string      `json:"cdiVersion"`
	Kind    string      `json:"kind"`
	Devices []cdiDevice `json:"devices"`
}

type cdiDevice struct {
	Name           string   `json:"name"`
	ContainerEdits cdiEdits `json:"containerEdits"`
}

type cdiEdits struct {
	Env []string `json:"env"`
}

// cdiPath is the plugin's one spec file in dir.
func cdiPath(dir, node string) string {
	return filepath.Join(dir, fmt.Sprintf("deviceplugin-%s.json", node))
}

// writeCDISpec writes the spec of every device atomically (a temporary name the CDI cache ignores,
// then a rename), so the runtime's cache never reads half a file.
func writeCDISpec(dir, kind, resource, node string, ids []string) error {
	spec := cdiSpec{Version: "0.6.0", Kind: kind}
	for _, id := range ids {
		key := strings.ReplaceAll(strings.ToUpper(id), "-", "_")
		spec.Devices = append(spec.Devices, cdiDevice{
			Name:           fmt.Sprintf("%s-%s", node, id),
			ContainerEdits: cdiEdits{Env: []string{fmt.Sprintf("DEVICE_PLUGIN_%s=%s/%s/%s", key, resource, node, id)}},
		})
	}
	raw, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	path := cdiPath(dir, node)
	if err := os.WriteFile(path+".tmp", append(raw, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(path+".tmp", path)
}
