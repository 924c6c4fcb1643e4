package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
)

// cdiSpec is the part of a CDI spec file (container-device-interface SPEC.md) the driver writes: one
// device per allocated device, whose only edit is an environment variable naming it, so a container
// running `env` shows exactly the devices a real runtime applied to it.
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

// cdiName is the device part of a CDI device ID: "<pool>-<device>[-<share>]".
func cdiName(r resourceapi.DeviceRequestAllocationResult) string {
	name := r.Pool + "-" + r.Device
	if r.ShareID != nil {
		name += "-" + string(*r.ShareID)
	}
	return name
}

// deviceEnv is DRA_DEVICE_<DEVICE>=<driver>/<pool>/<device>, the device's name upper-cased with
// "-" as "_" (a DRA device name is a DNS label, so the result is a valid variable name).
func deviceEnv(driver string, r resourceapi.DeviceRequestAllocationResult) string {
	key := strings.ReplaceAll(strings.ToUpper(r.Device), "-", "_")
	return fmt.Sprintf("DRA_DEVICE_%s=%s/%s/%s", key, driver, r.Pool, r.Device)
}

// cdiFile is where the spec of one claim's devices lives: one file per driver and claim, so
// unprepare removes exactly that claim's devices.
func cdiFile(dir, driver string, uid types.UID) string {
	return filepath.Join(dir, fmt.Sprintf("%s-%s.json", driver, uid))
}

// writeCDISpec writes the spec atomically (a temporary name the CDI cache ignores, then a rename),
// so the runtime's cache never reads half a file.
func writeCDISpec(dir, kind, driver string, uid types.UID, results []resourceapi.DeviceRequestAllocationResult) error {
	spec := cdiSpec{Version: "0.6.0", Kind: kind}
	for _, r := range results {
		spec.Devices = append(spec.Devices, cdiDevice{
			Name:           cdiName(r),
			ContainerEdits: cdiEdits{Env: []string{deviceEnv(driver, r)}},
		})
	}
	raw, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	path := cdiFile(dir, driver, uid)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(raw, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// removeCDISpec removes a claim's spec; one that is not there is already removed.
func removeCDISpec(dir, driver string, uid types.UID) error {
	if err := os.Remove(cdiFile(dir, driver, uid)); err != nil && !os.IsNotExist(err) {
		return err
	}
	return nil
}
