package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"

	"draxr.invalid/e2e/controlplane/nodes/internal/cdi"
)

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

// writeCDISpec writes the spec of one claim's devices (cdi.Spec.Write: atomically).
func writeCDISpec(dir, kind, driver string, uid types.UID, results []resourceapi.DeviceRequestAllocationResult) error {
	spec := cdi.NewSpec(kind)
	for _, r := range results {
		spec.Add(cdiName(r), deviceEnv(driver, r))
	}
	return spec.Write(cdiFile(dir, driver, uid))
}

// removeCDISpec removes a claim's spec; one that is not there is already removed.
func removeCDISpec(dir, driver string, uid types.UID) error {
	if err := os.Remove(cdiFile(dir, driver, uid)); err != nil && !os.IsNotExist(err) {
		return err
	}
	return nil
}
