package main

import (
	"path"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// exitOnStart is how a container of the pod ends when it has no command that exits (commandExit): a
// non-restartable init container (in spec.initContainers without restartPolicy: Always) exits 0 at
// once, so the pod goes on to its next container; sidecars, regular and ephemeral containers keep
// running.
func exitOnStart(pod *v1.Pod, container string) (int32, bool) {
	for _, c := range pod.Spec.InitContainers {
		if c.Name == container {
			sidecar := c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways
			return 0, !sidecar
		}
	}
	return 0, false
}

// commandExit is the exit code of a command+args that does nothing but exit: ["true"], ["false"],
// or a shell's "-c" with "exit N", "true" or "false" (["sh", "-c", "exit 1"]).
func commandExit(argv []string) (int32, bool) {
	if len(argv) == 3 && argv[1] == "-c" {
		switch path.Base(argv[0]) {
		case "sh", "bash", "ash", "dash":
			return shellExit(argv[2])
		}
	}
	if len(argv) == 1 {
		return shellExit(path.Base(argv[0]))
	}
	return 0, false
}

func shellExit(script string) (int32, bool) {
	words := strings.Fields(script)
	switch {
	case len(words) == 1 && words[0] == "true":
		return 0, true
	case len(words) == 1 && words[0] == "false":
		return 1, true
	case len(words) == 1 && words[0] == "exit":
		return 0, true
	case len(words) == 2 && words[0] == "exit":
		n, err := strconv.ParseUint(words[1], 10, 8)
		if err != nil {
			return 0, false
		}
		return int32(n), true
	}
	return 0, false
}
