package main

import (
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestCommandExit(t *testing.T) {
	for _, tc := range []struct {
		argv  []string
		code  int32
		exits bool
	}{
		{[]string{"sh", "-c", "exit 1"}, 1, true},
		{[]string{"/bin/sh", "-c", "exit 0"}, 0, true},
		{[]string{"bash", "-c", " exit  42 "}, 42, true},
		{[]string{"sh", "-c", "exit"}, 0, true},
		{[]string{"sh", "-c", "false"}, 1, true},
		{[]string{"true"}, 0, true},
		{[]string{"/bin/false"}, 1, true},
		{[]string{"sh", "-c", "exit 256"}, 0, false},
		{[]string{"sh", "-c", "sleep 1; exit 1"}, 0, false},
		{[]string{"sleep", "infinity"}, 0, false},
		{nil, 0, false},
	} {
		code, exits := commandExit(tc.argv)
		if code != tc.code || exits != tc.exits {
			t.Errorf("commandExit(%q) = %d, %v; want %d, %v", tc.argv, code, exits, tc.code, tc.exits)
		}
	}
}

func TestExitOnStart(t *testing.T) {
	always := v1.ContainerRestartPolicyAlways
	pod := &v1.Pod{Spec: v1.PodSpec{
		InitContainers: []v1.Container{{Name: "init"}, {Name: "side", RestartPolicy: &always}},
		Containers:     []v1.Container{{Name: "app"}},
	}}
	for name, want := range map[string]bool{"init": true, "side": false, "app": false, "debug": false} {
		if code, exits := exitOnStart(pod, name); exits != want || code != 0 {
			t.Errorf("exitOnStart(%s) = %d, %v; want 0, %v", name, code, exits, want)
		}
	}
}
