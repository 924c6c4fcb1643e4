// Command fakecri is the container runtime of a kubelet in draxr's e2e rows: k8s.io/cri-client's fake
// runtime (no processes, no images), serving the runtime and the image service on one unix socket,
// changed where a kubelet needs more than the stock fake gives:
//
//   - RuntimeReady and NetworkReady, the cgroupfs driver, and images of a non-zero size (the kubelet
//     refuses a container whose image has size 0);
//   - every CreateContainer is appended as one JSON line to --cdi-log, with the CDI device names the
//     kubelet passed (the stock fake drops them);
//   - containers end as real ones would: see exitOnStart.
//
// The contract is documented in e2e/controlplane/README.md ("The fake container runtime").
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	kubeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/cri-client/pkg/fake"

	"draxr.invalid/e2e/controlplane/nodes/internal/jsonl"
)

// The labels the kubelet puts on every container it creates.
const (
	podNamespaceLabel = "io.kubernetes.pod.namespace"
	podNameLabel      = "io.kubernetes.pod.name"
	podUIDLabel       = "io.kubernetes.pod.uid"
)

// imageSize is what every image weighs: anything but 0, which the kubelet rejects.
const imageSize = 1 << 20

// cdiRecord is one line of the CDI log: exactly these keys.
type cdiRecord struct {
	Namespace  string   `json:"namespace"`
	Pod        string   `json:"pod"`
	Container  string   `json:"container"`
	CDIDevices []string `json:"cdi_devices"`
}

// runtime is the stock fake with the overrides above.
type runtime struct {
	*fake.RemoteRuntime
	pods   kubernetes.Interface
	cdiLog *jsonl.Writer

	mu    sync.Mutex
	exits map[string]int32 // container ID -> the exit code it ends with once started
}

func (r *runtime) CreateContainer(ctx context.Context, req *kubeapi.CreateContainerRequest) (*kubeapi.CreateContainerResponse, error) {
	labels := req.GetConfig().GetLabels()
	ns, podName := labels[podNamespaceLabel], labels[podNameLabel]
	container := req.GetConfig().GetMetadata().GetName()
	code, exits, err := r.exitCode(ctx, ns, podName, labels[podUIDLabel], container, req.GetConfig())
	if err != nil {
		return nil, err
	}
	resp, err := r.RemoteRuntime.CreateContainer(ctx, req)
	if err != nil {
		return nil, err
	}
	devices := make([]string, 0, len(req.GetConfig().GetCDIDevices()))
	for _, d := range req.GetConfig().GetCDIDevices() {
		devices = append(devices, d.GetName())
	}
	if err := r.cdiLog.Append(cdiRecord{Namespace: ns, Pod: podName, Container: container, CDIDevices: devices}); err != nil {
		return nil, err
	}
	if exits {
		r.mu.Lock()
		r.exits[resp.ContainerId] = code
		r.mu.Unlock()
	}
	r.keepLogPath(resp.ContainerId, req)
	return resp, nil
}

// keepLogPath gives the container the log file a real runtime writes (empty here) and reports its
// path in the container's status, which the stock fake leaves empty. The kubelet removes a removed
// container's logs by globbing "<status.logPath>*": with an empty path that is every file in its
// working directory.
func (r *runtime) keepLogPath(id string, req *kubeapi.CreateContainerRequest) {
	logPath := "/nonexistent/fakecri-no-log-" + id
	if dir, name := req.GetSandboxConfig().GetLogDirectory(), req.GetConfig().GetLogPath(); dir != "" && name != "" {
		logPath = filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err == nil {
			if f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY, 0o640); err == nil {
				_ = f.Close()
			}
		}
	}
	svc := r.RuntimeService
	svc.Lock()
	defer svc.Unlock()
	if c, ok := svc.Containers[id]; ok {
		c.LogPath = logPath
	}
}

// exitCode decides whether a container ends right after it starts, and with which code.
func (r *runtime) exitCode(ctx context.Context, ns, name, uid, container string, config *kubeapi.ContainerConfig) (int32, bool, error) {
	if code, ok := commandExit(append(append([]string{}, config.GetCommand()...), config.GetArgs()...)); ok {
		return code, true, nil
	}
	pod, err := r.pods.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return 0, false, fmt.Errorf("fakecri: read pod %s/%s to tell an init container: %w", ns, name, err)
	}
	if uid != "" && string(pod.UID) != uid {
		return 0, false, fmt.Errorf("fakecri: pod %s/%s has uid %s, the container's is %s", ns, name, pod.UID, uid)
	}
	code, exits := exitOnStart(pod, container)
	return code, exits, nil
}

func (r *runtime) StartContainer(ctx context.Context, req *kubeapi.StartContainerRequest) (*kubeapi.StartContainerResponse, error) {
	resp, err := r.RemoteRuntime.StartContainer(ctx, req)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	code, exits := r.exits[req.ContainerId]
	delete(r.exits, req.ContainerId)
	r.mu.Unlock()
	if exits {
		svc := r.RuntimeService
		svc.Lock()
		if c, ok := svc.Containers[req.ContainerId]; ok {
			c.State = kubeapi.ContainerState_CONTAINER_EXITED
			c.FinishedAt = time.Now().UnixNano()
			c.ExitCode = code
			c.Reason = "Completed"
			if code != 0 {
				c.Reason = "Error"
			}
		}
		svc.Unlock()
	}
	return resp, nil
}

func main() {
	socket := flag.String("socket", "", "unix socket path to serve the CRI runtime and image services on")
	cdiLog := flag.String("cdi-log", "", "file to append one JSON line per CreateContainer to")
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig to read pods with (the node's)")
	flag.Parse()
	if *socket == "" || *cdiLog == "" || *kubeconfig == "" {
		fmt.Fprintln(os.Stderr, "fakecri: --socket, --cdi-log and --kubeconfig are required")
		os.Exit(2)
	}
	if err := run(*socket, *cdiLog, *kubeconfig); err != nil {
		fmt.Fprintln(os.Stderr, "fakecri:", err)
		os.Exit(1)
	}
}

func run(socket, cdiLogPath, kubeconfig string) error {
	config, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	pods, err := kubernetes.NewForConfig(config)
	if err != nil {
		return err
	}
	cdiLog, err := jsonl.Open(cdiLogPath)
	if err != nil {
		return err
	}
	defer cdiLog.Close()

	stock := fake.NewFakeRemoteRuntime()
	stock.RuntimeService.FakeStatus = &kubeapi.RuntimeStatus{Conditions: []*kubeapi.RuntimeCondition{
		{Type: kubeapi.RuntimeReady, Status: true},
		{Type: kubeapi.NetworkReady, Status: true},
	}}
	stock.RuntimeService.FakeLinuxConfiguration = &kubeapi.LinuxRuntimeConfiguration{CgroupDriver: kubeapi.CgroupDriver_CGROUPFS}
	stock.ImageService.SetFakeImageSize(imageSize)
	rt := &runtime{RemoteRuntime: stock, pods: pods, cdiLog: cdiLog, exits: map[string]int32{}}

	if err := os.Remove(socket); err != nil && !os.IsNotExist(err) {
		return err
	}
	listener, err := net.Listen("unix", socket)
	if err != nil {
		return err
	}
	server := grpc.NewServer()
	kubeapi.RegisterRuntimeServiceServer(server, rt)
	kubeapi.RegisterImageServiceServer(server, rt)

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	go func() {
		<-ctx.Done()
		server.Stop()
	}()
	fmt.Fprintf(os.Stderr, "fakecri: serving the CRI on %s, CDI log %s\n", socket, cdiLogPath)
	return server.Serve(listener)
}
