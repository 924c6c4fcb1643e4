// Command deviceplugin is a kubelet device plugin without hardware for draxr's e2e rows: it
// advertises --count devices of one extended resource (example.com/gpu) on one node, so that node
// has the name in its allocatable (KEP-5004's mixed cluster: there the name is the device plugin's).
// Allocate hands the kubelet CDI device IDs of another class than the DRA driver's, so the fake
// runtime's CDI log tells a device-plugin GPU from a DRA one; with --cdi-dir (a node on containerd)
// it writes their CDI spec, so a real runtime resolves them.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"draxr.invalid/e2e/controlplane/nodes/internal/jsonl"
)

type plugin struct {
	pluginapi.UnimplementedDevicePluginServer
	node, cdiKind string
	devices       []*pluginapi.Device
}

func (p *plugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return &pluginapi.DevicePluginOptions{}, nil
}

// ListAndWatch sends the devices once (they never change) and holds the stream open.
func (p *plugin) ListAndWatch(_ *pluginapi.Empty, stream grpc.ServerStreamingServer[pluginapi.ListAndWatchResponse]) error {
	if err := stream.Send(&pluginapi.ListAndWatchResponse{Devices: p.devices}); err != nil {
		return err
	}
	<-stream.Context().Done()
	return nil
}

func (p *plugin) Allocate(_ context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	resp := &pluginapi.AllocateResponse{}
	for _, c := range req.ContainerRequests {
		cr := &pluginapi.ContainerAllocateResponse{}
		for _, id := range c.DevicesIds {
			cr.CdiDevices = append(cr.CdiDevices, &pluginapi.CDIDevice{Name: fmt.Sprintf("%s=%s-%s", p.cdiKind, p.node, id)})
		}
		resp.ContainerResponses = append(resp.ContainerResponses, cr)
	}
	return resp, nil
}

func (p *plugin) GetPreferredAllocation(context.Context, *pluginapi.PreferredAllocationRequest) (*pluginapi.PreferredAllocationResponse, error) {
	return &pluginapi.PreferredAllocationResponse{}, nil
}

func (p *plugin) PreStartContainer(context.Context, *pluginapi.PreStartContainerRequest) (*pluginapi.PreStartContainerResponse, error) {
	return &pluginapi.PreStartContainerResponse{}, nil
}

func main() {
	resource := flag.String("resource", "example.com/gpu", "the extended resource to advertise")
	count := flag.Int("count", 2, "how many devices (dp-gpu-0..)")
	node := flag.String("node-name", "", "the node, for the CDI device names (required)")
	dir := flag.String("dir", pluginapi.DevicePluginPath, "the kubelet's device-plugins directory, where kubelet.sock is")
	socket := flag.String("socket", "draxr-e2e-gpu.sock", "this plugin's socket file in --dir")
	cdiKind := flag.String("cdi-kind", "draxr.e2e/dp-gpu", "vendor/class of the CDI device IDs")
	readyFile := flag.String("ready-file", "", "created once the kubelet accepted the registration")
	cdiDir := flag.String("cdi-dir", "", "write the devices' CDI spec here (a node with a real runtime)")
	flag.Parse()
	if *node == "" {
		fmt.Fprintln(os.Stderr, "deviceplugin: --node-name is required")
		os.Exit(2)
	}
	p := &plugin{node: *node, cdiKind: *cdiKind}
	ids := make([]string, 0, *count)
	for i := range *count {
		ids = append(ids, fmt.Sprintf("dp-gpu-%d", i))
		p.devices = append(p.devices, &pluginapi.Device{ID: ids[i], Health: pluginapi.Healthy})
	}
	if *cdiDir != "" {
		if err := writeCDISpec(*cdiDir, *cdiKind, *resource, *node, ids); err != nil {
			fmt.Fprintln(os.Stderr, "deviceplugin: CDI spec:", err)
			os.Exit(1)
		}
		defer os.Remove(cdiPath(*cdiDir, *node))
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := run(ctx, p, *dir, *socket, *resource, *readyFile); err != nil {
		fmt.Fprintln(os.Stderr, "deviceplugin:", err)
		os.Exit(1)
	}
}

// run serves and registers the plugin each time a kubelet (re)creates its socket: a starting kubelet
// removes the sockets in the directory, and expects plugins to register again.
func run(ctx context.Context, p *plugin, dir, socket, resource, readyFile string) error {
	kubeletSock := filepath.Join(dir, "kubelet.sock")
	for {
		kubelet, err := waitFor(ctx, kubeletSock, nil)
		if err != nil {
			return nil // stopped
		}
		server, err := serve(p, filepath.Join(dir, socket))
		if err != nil {
			return err
		}
		if err := register(ctx, kubeletSock, socket, resource); err != nil {
			server.Stop()
			return err
		}
		if err := jsonl.Touch(readyFile); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "deviceplugin: %d x %s registered with the kubelet at %s\n", len(p.devices), resource, kubeletSock)
		_, err = waitFor(ctx, kubeletSock, kubelet) // until the kubelet's socket is another
		server.Stop()
		if err != nil {
			return nil
		}
	}
}

// waitFor polls until path exists and is not the file `old`; an error once ctx is done.
func waitFor(ctx context.Context, path string, old os.FileInfo) (os.FileInfo, error) {
	for {
		if fi, err := os.Stat(path); err == nil && (old == nil || !os.SameFile(fi, old)) {
			return fi, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func serve(p *plugin, path string) (*grpc.Server, error) {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	listener, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	server := grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(server, p)
	go func() { _ = server.Serve(listener) }()
	return server, nil
}

func register(ctx context.Context, kubeletSock, socket, resource string) error {
	conn, err := grpc.NewClient("unix://"+kubeletSock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, err = pluginapi.NewRegistrationClient(conn).Register(ctx, &pluginapi.RegisterRequest{
		Version:      pluginapi.Version,
		Endpoint:     socket,
		ResourceName: resource,
	})
	if err != nil {
		return fmt.Errorf("register %s with the kubelet at %s: %w", resource, kubeletSock, err)
	}
	return nil
}
