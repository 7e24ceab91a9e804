// fakecri is a container runtime for the real kubelet that runs nothing: the kubelet's own test
// fake (k8s.io/cri-client/pkg/fake over k8s.io/cri-api/pkg/apis/testing) on a unix socket, with
// every PullImage recorded (the image and the AuthConfig the kubelet sent) as one JSON line.
//
// Usage:
//
//	fakecri --socket PATH --pulls FILE
//
// It reports the runtime and network ready and the cgroupfs driver, and gives every image a size
// (the kubelet's image manager refuses images of size 0), and lists the images pulled as a real
// runtime does (crictl images). It runs until killed.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/cri-client/pkg/fake"
)

// pull is one PullImage as the runtime received it.
type pull struct {
	Image    string `json:"image"`
	HasAuth  bool   `json:"hasAuth"`
	Username string `json:"username"`
	Password string `json:"password"`
}

// recordingImages serves the image API of the fake, recording each pull first.
type recordingImages struct {
	*fake.RemoteRuntime
	mu  sync.Mutex
	out *os.File
}

func (r *recordingImages) PullImage(ctx context.Context, req *runtimeapi.PullImageRequest) (*runtimeapi.PullImageResponse, error) {
	record := pull{Image: req.GetImage().GetImage()}
	if auth := req.GetAuth(); auth != nil {
		record.HasAuth = true
		record.Username = auth.GetUsername()
		record.Password = auth.GetPassword()
	}
	line, err := json.Marshal(record)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	_, err = r.out.Write(append(line, '\n'))
	r.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return r.RemoteRuntime.PullImage(ctx, req)
}

// ListImages treats a filter naming no image as no filter, as containerd and CRI-O do (crictl
// images sends one); the test fake would match it against every tag and list nothing.
func (r *recordingImages) ListImages(ctx context.Context, req *runtimeapi.ListImagesRequest) (*runtimeapi.ListImagesResponse, error) {
	if filter := req.GetFilter(); filter != nil && filter.GetImage().GetImage() == "" {
		req = &runtimeapi.ListImagesRequest{}
	}
	return r.RemoteRuntime.ListImages(ctx, req)
}

func main() {
	socket := flag.String("socket", "", "unix socket to serve the CRI on")
	pulls := flag.String("pulls", "", "file to append one JSON line per PullImage to")
	flag.Parse()
	if *socket == "" || *pulls == "" {
		fmt.Fprintln(os.Stderr, "fakecri: --socket and --pulls are required")
		os.Exit(2)
	}
	out, err := os.OpenFile(*pulls, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		fmt.Fprintf(os.Stderr, "fakecri: %v\n", err)
		os.Exit(1)
	}

	runtime := fake.NewFakeRemoteRuntime()
	runtime.RuntimeService.FakeStatus = &runtimeapi.RuntimeStatus{
		Conditions: []*runtimeapi.RuntimeCondition{
			{Type: runtimeapi.RuntimeReady, Status: true},
			{Type: runtimeapi.NetworkReady, Status: true},
		},
	}
	runtime.RuntimeService.FakeLinuxConfiguration = &runtimeapi.LinuxRuntimeConfiguration{
		CgroupDriver: runtimeapi.CgroupDriver_CGROUPFS,
	}
	runtime.ImageService.SetFakeImageSize(1 << 20)

	server := grpc.NewServer()
	runtimeapi.RegisterRuntimeServiceServer(server, runtime)
	runtimeapi.RegisterImageServiceServer(server, &recordingImages{RemoteRuntime: runtime, out: out})

	_ = os.Remove(*socket)
	listener, err := net.Listen("unix", *socket)
	if err != nil {
		fmt.Fprintf(os.Stderr, "fakecri: %v\n", err)
		os.Exit(1)
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-stop
		server.Stop()
	}()
	if err := server.Serve(listener); err != nil {
		fmt.Fprintf(os.Stderr, "fakecri: %v\n", err)
		os.Exit(1)
	}
}
