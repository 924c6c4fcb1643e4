package main

import (
	"fmt"
	"path/filepath"
	"strings"

	"draxr.invalid/e2e/controlplane/nodes/internal/cdi"
)

// cdiPath is the plugin's one spec file in dir. On a node with a real container runtime the CDI
// device IDs Allocate hands the kubelet must resolve, or the runtime refuses to create the container.
func cdiPath(dir, node string) string {
	return filepath.Join(dir, fmt.Sprintf("deviceplugin-%s.json", node))
}

// writeCDISpec writes the spec of every device: each one's only edit is
// DEVICE_PLUGIN_<ID>=<resource>/<node>/<id>, so a container running `env` shows which device-plugin
// GPUs it got, apart from DRA's DRA_DEVICE_.
func writeCDISpec(dir, kind, resource, node string, ids []string) error {
	spec := cdi.NewSpec(kind)
	for _, id := range ids {
		key := strings.ReplaceAll(strings.ToUpper(id), "-", "_")
		spec.Add(fmt.Sprintf("%s-%s", node, id), fmt.Sprintf("DEVICE_PLUGIN_%s=%s/%s/%s", key, resource, node, id))
	}
	return spec.Write(cdiPath(dir, node))
}
