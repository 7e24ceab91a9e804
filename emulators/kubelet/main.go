// kubelet-harness drives credential provider plugins with the real kubelet code
// (k8s.io/kubernetes/pkg/credentialprovider/plugin): config reading and validation,
// matchImages, exec, strict response decoding, the cache, singleflight and the keyring.
//
// Usage:
//
//	kubelet-harness --config FILE|DIR --bin-dir DIR [--script FILE] [--concurrency N] [--v N]
//	kubelet-harness --validate-only --config FILE|DIR [--bin-dir DIR]
//
// The script (JSON, stdin by default) is a list of lookups:
//
//	[{"image": "...", "namespace": "...", "pod": "...", "podUID": "...", "sleepBefore": "1s",
//	  "serviceAccount": {"name": "...", "uid": "...", "annotations": {...}, "token": "..."}}]
//
// A "{pod}" in a token is replaced by the name of the pod the token is requested for.
//
// One JSON line per lookup is printed on stdout; klog (the kubelet's own messages) goes to stderr.
// Registration is process-global in the kubelet, so one process serves one config.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/credentialprovider/plugin"
)

type serviceAccount struct {
	Name        string            `json:"name"`
	UID         string            `json:"uid"`
	Annotations map[string]string `json:"annotations"`
	Token       string            `json:"token"`
}

type lookup struct {
	Image          string          `json:"image"`
	Namespace      string          `json:"namespace"`
	Pod            string          `json:"pod"`
	PodUID         string          `json:"podUID"`
	SleepBefore    string          `json:"sleepBefore"`
	ServiceAccount *serviceAccount `json:"serviceAccount"`
}

type credential struct {
	Username string `json:"username"`
	Password string `json:"password"`
}

type result struct {
	Index       int          `json:"index"`
	Image       string       `json:"image"`
	Found       bool         `json:"found"`
	Credentials []credential `json:"credentials"`
	Seconds     float64      `json:"seconds"`
}

type validation struct {
	Valid bool   `json:"valid"`
	Error string `json:"error,omitempty"`
}

func main() {
	klog.InitFlags(nil)
	configPath := flag.String("config", "", "CredentialProviderConfig file or directory")
	binDir := flag.String("bin-dir", "", "plugin binary directory")
	scriptPath := flag.String("script", "-", "lookup script (JSON list); - for stdin")
	validateOnly := flag.Bool("validate-only", false, "only read and validate the config, as the kubelet does at start-up")
	concurrency := flag.Int("concurrency", 1, "lookups in flight at once (results then print as they finish)")
	flag.Parse()

	if *validateOnly {
		os.Exit(validate(*configPath, *binDir))
	}

	var script []lookup
	data, err := readScript(*scriptPath)
	if err == nil {
		err = json.Unmarshal(data, &script)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "kubelet-harness: bad script: %v\n", err)
		os.Exit(2)
	}
	accounts := map[string]*serviceAccount{}
	for _, l := range script {
		if l.ServiceAccount != nil {
			accounts[namespaceOf(l)+"/"+l.ServiceAccount.Name] = l.ServiceAccount
		}
	}

	getToken := func(namespace, name string, tr *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
		sa, ok := accounts[namespace+"/"+name]
		if !ok {
			return nil, fmt.Errorf("no service account %s/%s in the script", namespace, name)
		}
		answer := tr.DeepCopy()
		// A token bound to its pod, as the API server's are: "{pod}" in the script's token
		// becomes the name of the pod the kubelet asked for.
		answer.Status.Token = sa.Token
		if tr.Spec.BoundObjectRef != nil {
			answer.Status.Token = strings.ReplaceAll(sa.Token, "{pod}", tr.Spec.BoundObjectRef.Name)
		}
		answer.Status.ExpirationTimestamp = metav1.NewTime(time.Now().Add(time.Hour))
		return answer, nil
	}
	getServiceAccount := func(namespace, name string) (*v1.ServiceAccount, error) {
		sa, ok := accounts[namespace+"/"+name]
		if !ok {
			return nil, fmt.Errorf("no service account %s/%s in the script", namespace, name)
		}
		return &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: namespace, UID: types.UID(sa.UID), Annotations: sa.Annotations,
		}}, nil
	}

	if err := plugin.RegisterCredentialProviderPlugins(*configPath, *binDir, getToken, getServiceAccount); err != nil {
		fmt.Fprintf(os.Stderr, "kubelet-harness: Failed to register CRI auth plugins: %v\n", err)
		os.Exit(3)
	}

	out := json.NewEncoder(os.Stdout)
	var mu sync.Mutex
	work := make(chan int)
	var wg sync.WaitGroup
	workers := *concurrency
	if workers < 1 {
		workers = 1
	}
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				res := doLookup(i, script[i])
				mu.Lock()
				err := out.Encode(res)
				mu.Unlock()
				if err != nil {
					os.Exit(4)
				}
			}
		}()
	}
	for i := range script {
		work <- i
	}
	close(work)
	wg.Wait()
	klog.Flush()
}

func doLookup(index int, l lookup) result {
	if l.SleepBefore != "" {
		pause, err := time.ParseDuration(l.SleepBefore)
		if err != nil {
			fmt.Fprintf(os.Stderr, "kubelet-harness: bad sleepBefore: %v\n", err)
			os.Exit(2)
		}
		time.Sleep(pause)
	}
	saName := ""
	if l.ServiceAccount != nil {
		saName = l.ServiceAccount.Name
	}
	start := time.Now()
	keyring := plugin.NewExternalCredentialProviderDockerKeyring(namespaceOf(l), l.Pod, l.PodUID, saName)
	found, ok := keyring.Lookup(l.Image)
	res := result{Index: index, Image: l.Image, Found: ok, Credentials: []credential{}, Seconds: time.Since(start).Seconds()}
	for _, c := range found {
		res.Credentials = append(res.Credentials, credential{Username: c.Username, Password: c.Password})
	}
	return res
}

func namespaceOf(l lookup) string {
	if l.Namespace == "" {
		return "default"
	}
	return l.Namespace
}

func readScript(path string) ([]byte, error) {
	if path == "-" {
		return io.ReadAll(os.Stdin)
	}
	return os.ReadFile(path)
}

// validate runs the kubelet's start-up path: read the config (file or directory), decode strictly,
// validate. Without a bin dir an empty one is used: the binary check comes after validation, so its
// error means the config itself passed.
func validate(configPath, binDir string) int {
	emptyBinDir := binDir == ""
	if emptyBinDir {
		dir, err := os.MkdirTemp("", "kubelet-harness-bin")
		if err != nil {
			fmt.Fprintf(os.Stderr, "kubelet-harness: %v\n", err)
			return 2
		}
		defer os.RemoveAll(dir)
		binDir = dir
	}
	err := plugin.RegisterCredentialProviderPlugins(configPath, binDir, nil, nil)
	v := validation{Valid: err == nil}
	if err != nil {
		v.Error = err.Error()
		if emptyBinDir && strings.HasPrefix(v.Error, "plugin binary executable") {
			v = validation{Valid: true}
		}
	}
	if err := json.NewEncoder(os.Stdout).Encode(v); err != nil {
		return 4
	}
	if !v.Valid {
		return 1
	}
	return 0
}
