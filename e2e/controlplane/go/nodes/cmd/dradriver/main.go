// Command dradriver is a DRA driver without hardware for draxr's e2e rows, built on
// k8s.io/dynamic-resource-allocation/kubeletplugin: it registers with one kubelet through the plugin
// registration directory, publishes a ResourceSlice for that node (by default eight GPUs, plus
// --attachable devices with binding conditions, KEP-5007), and
// prepares claims by handing the kubelet CDI device IDs that name the devices. Every prepare and
// unprepare call is appended as a JSON line to --prepare-log, so tests can tell what was prepared
// when, and whether anything was prepared twice.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/klog/v2"

	"draxr.invalid/e2e/controlplane/nodes/internal/jsonl"
)

type options struct {
	node, driver, kubeconfig  string
	registryDir, pluginDir    string
	cdiKind, cdiDir, devices  string
	gpus, attachable          int
	publish                   bool
	prepareLog, readyFile     string
	registrationTimeoutSecond int
}

func main() {
	var o options
	klog.InitFlags(nil)
	flag.StringVar(&o.node, "node-name", "", "the Node this driver runs on (required)")
	flag.StringVar(&o.driver, "driver-name", "gpu.example.com", "the DRA driver name")
	flag.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig of the driver's identity (required)")
	flag.StringVar(&o.registryDir, "registry-dir", kubeletplugin.KubeletRegistryDir, "the kubelet's plugin registration directory (<root-dir>/plugins_registry)")
	flag.StringVar(&o.pluginDir, "plugin-dir", "", "directory for the driver's DRA socket (default <kubelet plugins dir>/<driver>)")
	flag.StringVar(&o.cdiKind, "cdi-kind", "draxr.e2e/gpu", "vendor/class of the CDI device IDs handed to the kubelet")
	flag.StringVar(&o.cdiDir, "cdi-dir", "", "write a CDI spec per prepared claim here (the runtime's CDI spec dir); each device gets DRA_DEVICE_<DEVICE>=<driver>/<pool>/<device>")
	flag.IntVar(&o.gpus, "gpus", 8, "publish this many GPUs gpu-0..gpu-<n-1> (ignored with --devices)")
	flag.IntVar(&o.attachable, "attachable", 0, "also publish this many devices attachable-0..<n-1> that bind only once <driver>/Attached is True in the claim's status.devices (binding conditions, KEP-5007; failure condition <driver>/AttachFailed; bindsToNode)")
	flag.StringVar(&o.devices, "devices", "", "the devices to publish: a JSON list of resource.k8s.io/v1 Devices, or @FILE")
	flag.BoolVar(&o.publish, "publish", true, "publish a ResourceSlice (false: only prepare claims whose devices others publish)")
	flag.StringVar(&o.prepareLog, "prepare-log", "", "file to append one JSON line per prepare or unprepare call to (required)")
	flag.StringVar(&o.readyFile, "ready-file", "", "created once the kubelet registered the driver and the slice is handed to the publisher")
	flag.IntVar(&o.registrationTimeoutSecond, "registration-timeout", 120, "seconds to wait for the kubelet's registration")
	flag.Parse()
	if o.attachable < 0 {
		fmt.Fprintln(os.Stderr, "dradriver: --attachable must be zero or more")
		os.Exit(2)
	}
	if o.node == "" || o.kubeconfig == "" || o.prepareLog == "" {
		fmt.Fprintln(os.Stderr, "dradriver: --node-name, --kubeconfig and --prepare-log are required")
		os.Exit(2)
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "dradriver:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	devices, err := deviceList(o)
	if err != nil {
		return err
	}
	config, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		return err
	}
	log, err := jsonl.Open(o.prepareLog)
	if err != nil {
		return err
	}
	defer log.Close()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	ctx, cancel := context.WithCancelCause(ctx)
	d := newDriver(o.node, o.driver, o.cdiKind, o.cdiDir, log, cancel)
	opts := []kubeletplugin.Option{
		kubeletplugin.DriverName(o.driver),
		kubeletplugin.NodeName(o.node),
		kubeletplugin.KubeClient(client),
		kubeletplugin.RegistrarDirectoryPath(o.registryDir),
		kubeletplugin.HealthService(false),
	}
	if o.pluginDir != "" {
		opts = append(opts, kubeletplugin.PluginDataDirectoryPath(o.pluginDir))
	}
	// A DaemonSet's hostPath volumes would make these; the driver may start before its kubelet.
	for _, dir := range []string{o.registryDir, o.pluginDir} {
		if dir == "" {
			continue
		}
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return err
		}
	}
	helper, err := kubeletplugin.Start(ctx, d, opts...)
	if err != nil {
		return err
	}
	defer helper.Stop()
	if o.publish {
		pool := resourceslice.Pool{Slices: []resourceslice.Slice{{Devices: devices}}}
		resources := resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{o.node: pool}}
		if err := helper.PublishResources(ctx, resources); err != nil {
			return err
		}
	}
	if err := waitRegistered(ctx, helper, time.Duration(o.registrationTimeoutSecond)*time.Second); err != nil {
		return err
	}
	if err := jsonl.Touch(o.readyFile); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "dradriver: %s registered with the kubelet of %s (%d devices published: %v)\n", o.driver, o.node, len(devices), o.publish)
	<-ctx.Done()
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	return nil
}

// waitRegistered polls (bounded) until the kubelet has told the registrar that it registered the
// driver.
func waitRegistered(ctx context.Context, helper *kubeletplugin.Helper, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if s := helper.RegistrationStatus(); s != nil {
			if !s.PluginRegistered {
				return fmt.Errorf("the kubelet refused the driver: %s", s.Error)
			}
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no kubelet registered the driver within %s", timeout)
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// deviceList is --devices (JSON or @FILE), or --gpus generated GPUs; then --attachable devices.
func deviceList(o options) ([]resourceapi.Device, error) {
	if o.devices == "" {
		return append(gpus(o.gpus), attachable(o.driver, o.attachable)...), nil
	}
	raw := []byte(o.devices)
	if name, ok := strings.CutPrefix(o.devices, "@"); ok {
		var err error
		if raw, err = os.ReadFile(name); err != nil {
			return nil, err
		}
	}
	var devices []resourceapi.Device
	if err := json.Unmarshal(raw, &devices); err != nil {
		return nil, fmt.Errorf("--devices: not a JSON list of resource.k8s.io/v1 Devices: %w", err)
	}
	return append(devices, attachable(o.driver, o.attachable)...), nil
}
