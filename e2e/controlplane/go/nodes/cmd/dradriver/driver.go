package main

import (
	"context"
	"errors"
	"fmt"
	"sync"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"draxr.invalid/e2e/controlplane/nodes/internal/jsonl"
)

// gpus are the default devices: n GPUs, half on NUMA node 0 and half on 1, two per PCIe root.
func gpus(n int) []resourceapi.Device {
	out := make([]resourceapi.Device, 0, n)
	for i := range n {
		out = append(out, resourceapi.Device{
			Name: fmt.Sprintf("gpu-%d", i),
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
				"model":    {StringValue: ptr.To("LATEST-GPU-MODEL")},
				"index":    {IntValue: ptr.To(int64(i))},
				"numa":     {IntValue: ptr.To(int64(i * 2 / max(n, 1)))},
				"pcieRoot": {StringValue: ptr.To(fmt.Sprintf("pci0000:%02x", i/2))},
			},
			Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
				"memory": {Value: resource.MustParse("80Gi")},
			},
		})
	}
	return out
}

// Binding conditions of the attachable devices (KEP-5007): the scheduler binds a pod to one only once
// the claim's status.devices entry shows Attached True; AttachFailed True makes it release the device
// and place the pod again. This driver never sets them: a test does, as a fabric controller would.
const (
	attachedCondition     = "Attached"
	attachFailedCondition = "AttachFailed"
)

// attachable are n devices like composable or fabric-attached GPUs: each waits for the driver's
// <driver>/Attached condition before a pod binds, fails on <driver>/AttachFailed, and its
// allocation is pinned to the node it was made for (bindsToNode).
func attachable(driverName string, n int) []resourceapi.Device {
	out := make([]resourceapi.Device, 0, n)
	for i := range n {
		out = append(out, resourceapi.Device{
			Name: fmt.Sprintf("attachable-%d", i),
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
				"model":      {StringValue: ptr.To("LATEST-GPU-MODEL")},
				"index":      {IntValue: ptr.To(int64(i))},
				"attachable": {BoolValue: ptr.To(true)},
			},
			Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
				"memory": {Value: resource.MustParse("80Gi")},
			},
			BindsToNode:              ptr.To(true),
			BindingConditions:        []string{driverName + "/" + attachedCondition},
			BindingFailureConditions: []string{driverName + "/" + attachFailedCondition},
		})
	}
	return out
}

// record is one line of the prepare log.
type record struct {
	Op     string        `json:"op"` // "prepare" or "unprepare"
	Node   string        `json:"node"`
	Driver string        `json:"driver"`
	Claims []claimRecord `json:"claims"`
}

type claimRecord struct {
	UID        types.UID `json:"uid"`
	Namespace  string    `json:"namespace"`
	Name       string    `json:"name"`
	CDIDevices []string  `json:"cdi_devices,omitempty"`
	Error      string    `json:"error,omitempty"`
}

// driver prepares claims by naming their devices; like a real driver it refuses to hand a device
// that is not shareable to a second claim while the first still has it.
type driver struct {
	node, name, cdiKind string
	// cdiDir, when set, gets a CDI spec file per prepared claim (a real runtime applies it).
	cdiDir string
	log    *jsonl.Writer
	fail   context.CancelCauseFunc

	mu       sync.Mutex
	prepared map[types.UID][]kubeletplugin.Device
	holder   map[string]types.UID // "<pool>/<device>" -> the claim it is prepared for (exclusive devices)
}

func newDriver(node, name, cdiKind, cdiDir string, log *jsonl.Writer, fail context.CancelCauseFunc) *driver {
	return &driver{
		node: node, name: name, cdiKind: cdiKind, cdiDir: cdiDir, log: log, fail: fail,
		prepared: map[types.UID][]kubeletplugin.Device{},
		holder:   map[string]types.UID{},
	}
}

// cdiID names one allocated device (and its share, for a device allocated to several claims).
func (d *driver) cdiID(r resourceapi.DeviceRequestAllocationResult) string {
	return d.cdiKind + "=" + cdiName(r)
}

func (d *driver) PrepareResourceClaims(ctx context.Context, claims []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[types.UID]kubeletplugin.PrepareResult, len(claims))
	rec := record{Op: "prepare", Node: d.node, Driver: d.name}
	for _, claim := range claims {
		devices, err := d.prepare(claim)
		out[claim.UID] = kubeletplugin.PrepareResult{Devices: devices, Err: err}
		cr := claimRecord{UID: claim.UID, Namespace: claim.Namespace, Name: claim.Name}
		for _, dev := range devices {
			cr.CDIDevices = append(cr.CDIDevices, dev.CDIDeviceIDs...)
		}
		if err != nil {
			cr.Error = err.Error()
		}
		rec.Claims = append(rec.Claims, cr)
	}
	return out, d.log.Append(rec)
}

func (d *driver) prepare(claim *resourceapi.ResourceClaim) ([]kubeletplugin.Device, error) {
	if claim.Status.Allocation == nil {
		return nil, fmt.Errorf("claim %s/%s is not allocated", claim.Namespace, claim.Name)
	}
	if devices, ok := d.prepared[claim.UID]; ok {
		return devices, nil // the kubelet may ask again (after a restart): the same answer
	}
	var devices []kubeletplugin.Device
	var taken []string
	var mine []resourceapi.DeviceRequestAllocationResult
	for _, r := range claim.Status.Allocation.Devices.Results {
		if r.Driver != d.name {
			continue
		}
		mine = append(mine, r)
		key := r.Pool + "/" + r.Device
		if r.ShareID == nil {
			if other, ok := d.holder[key]; ok && other != claim.UID {
				return nil, fmt.Errorf("device %s is prepared for claim %s already", key, other)
			}
			taken = append(taken, key)
		}
		devices = append(devices, kubeletplugin.Device{
			Requests:     []string{r.Request},
			PoolName:     r.Pool,
			DeviceName:   r.Device,
			CDIDeviceIDs: []string{d.cdiID(r)},
			ShareID:      r.ShareID,
		})
	}
	if d.cdiDir != "" && len(mine) > 0 {
		if err := writeCDISpec(d.cdiDir, d.cdiKind, d.name, claim.UID, mine); err != nil {
			return nil, fmt.Errorf("write the CDI spec of claim %s/%s: %w", claim.Namespace, claim.Name, err)
		}
	}
	for _, key := range taken {
		d.holder[key] = claim.UID
	}
	d.prepared[claim.UID] = devices
	return devices, nil
}

func (d *driver) UnprepareResourceClaims(ctx context.Context, claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[types.UID]error, len(claims))
	rec := record{Op: "unprepare", Node: d.node, Driver: d.name}
	for _, claim := range claims {
		for _, dev := range d.prepared[claim.UID] {
			key := dev.PoolName + "/" + dev.DeviceName
			if d.holder[key] == claim.UID {
				delete(d.holder, key)
			}
		}
		delete(d.prepared, claim.UID)
		out[claim.UID] = nil
		if d.cdiDir != "" {
			out[claim.UID] = removeCDISpec(d.cdiDir, d.name, claim.UID)
		}
		rec.Claims = append(rec.Claims, claimRecord{UID: claim.UID, Namespace: claim.Namespace, Name: claim.Name})
	}
	return out, d.log.Append(rec)
}

// HandleError logs background errors (publishing slices); a fatal one stops the driver.
func (d *driver) HandleError(ctx context.Context, err error, msg string) {
	klog.FromContext(ctx).Error(err, msg)
	if !errors.Is(err, kubeletplugin.ErrRecoverable) {
		d.fail(fmt.Errorf("%s: %w", msg, err))
	}
}

// WatchHealthStatus is never called: the health service is off.
func (d *driver) WatchHealthStatus(context.Context, chan<- kubeletplugin.DeviceHealthReport) error {
	return kubeletplugin.ErrHealthNotSupported
}
