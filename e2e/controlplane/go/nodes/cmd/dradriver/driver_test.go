package main

import (
	"slices"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
)

func TestAttachableDevicesCarryBindingConditions(t *testing.T) {
	devices := attachable("gpu.example.com", 2)
	if len(devices) != 2 || devices[0].Name != "attachable-0" || devices[1].Name != "attachable-1" {
		t.Fatalf("unexpected devices %+v", devices)
	}
	for _, d := range devices {
		if !slices.Equal(d.BindingConditions, []string{"gpu.example.com/Attached"}) ||
			!slices.Equal(d.BindingFailureConditions, []string{"gpu.example.com/AttachFailed"}) ||
			d.BindsToNode == nil || !*d.BindsToNode {
			t.Fatalf("device %s: conditions %v, failure %v, bindsToNode %v", d.Name, d.BindingConditions, d.BindingFailureConditions, d.BindsToNode)
		}
	}
}

func TestDeviceListAppendsAttachableDevicesToEitherList(t *testing.T) {
	generated, err := deviceList(options{driver: "d.example.com", gpus: 2, attachable: 1})
	if err != nil {
		t.Fatal(err)
	}
	if names := deviceNames(generated); !slices.Equal(names, []string{"gpu-0", "gpu-1", "attachable-0"}) {
		t.Fatalf("generated: %v", names)
	}
	given, err := deviceList(options{driver: "d.example.com", devices: `[{"name":"x"}]`, attachable: 1})
	if err != nil {
		t.Fatal(err)
	}
	if names := deviceNames(given); !slices.Equal(names, []string{"x", "attachable-0"}) {
		t.Fatalf("given: %v", names)
	}
	plain, err := deviceList(options{driver: "d.example.com", gpus: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(plain) != 1 || plain[0].BindingConditions != nil {
		t.Fatalf("without --attachable: %+v", plain)
	}
}

func deviceNames(devices []resourceapi.Device) []string {
	names := make([]string, 0, len(devices))
	for _, d := range devices {
		names = append(names, d.Name)
	}
	return names
}
