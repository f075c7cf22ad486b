package env

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Address ranges of the environment's cluster. Pods on kwok nodes get IPs
// from podCIDR; Services get cluster IPs from serviceCIDR.
const (
	serviceCIDR = "10.96.0.0/16"
	podCIDR     = "10.244.0.0/16"
)

const startTimeout = 60 * time.Second

// frontProxyClient is the common name of the apiserver's front proxy client
// certificate.
const frontProxyClient = "front-proxy-client"

// startEtcd starts etcd with its data in dir/etcd on two free loopback
// ports and waits until it reports healthy. It returns the client URL.
func startEtcd(ctx context.Context, bin, dir, logDir string) (*process, string, error) {
	type result struct {
		p   *process
		url string
	}
	r, err := startWithRetry(func() (result, error) {
		ports, err := freePorts(2)
		if err != nil {
			return result{}, err
		}
		clientURL := "http://" + hostPort(ports[0])
		peerURL := "http://" + hostPort(ports[1])
		dataDir := filepath.Join(dir, "etcd")
		if err := os.RemoveAll(dataDir); err != nil {
			return result{}, err
		}
		p, err := startProcess("etcd", bin, []string{
			"--name=default",
			"--data-dir=" + dataDir,
			"--listen-client-urls=" + clientURL,
			"--advertise-client-urls=" + clientURL,
			"--listen-peer-urls=" + peerURL,
			"--initial-advertise-peer-urls=" + peerURL,
			"--initial-cluster=default=" + peerURL,
			// The data is thrown away with the environment; fsync only costs time.
			"--unsafe-no-fsync=true",
			"--log-level=warn",
		}, logDir)
		if err != nil {
			return result{}, err
		}
		err = p.waitReady(ctx, startTimeout, httpCheck(http.DefaultClient, clientURL+"/health", `"health":"true"`))
		if err != nil {
			p.stop(time.Second)
			return result{}, err
		}
		return result{p, clientURL}, nil
	})
	return r.p, r.url, err
}

// apiserverFiles are the credentials the apiserver is started with.
type apiserverFiles struct {
	caCert, servingCert, servingKey string
	saPrivate, saPublic             string
	// The front proxy (aggregation layer) CA and the apiserver's client
	// certificate from it; with them the apiserver publishes a complete
	// kube-system/extension-apiserver-authentication ConfigMap, which the
	// controller manager and scheduler read for delegated authentication.
	frontProxyCACert, proxyClientCert, proxyClientKey string
}

// startAPIServer starts kube-apiserver on a free loopback port against etcdURL
// and waits until /readyz answers 200 for admin. It returns the https URL.
// profiling serves /debug/pprof.
func startAPIServer(ctx context.Context, bin string, files apiserverFiles, etcdURL, logDir string, admin *rest.Config, profiling bool) (*process, string, error) {
	type result struct {
		p   *process
		url string
	}
	r, err := startWithRetry(func() (result, error) {
		port, err := freePort()
		if err != nil {
			return result{}, err
		}
		url := "https://" + hostPort(port)
		p, err := startProcess("kube-apiserver", bin, []string{
			"--etcd-servers=" + etcdURL,
			"--bind-address=127.0.0.1",
			"--advertise-address=127.0.0.1",
			fmt.Sprintf("--secure-port=%d", port),
			"--tls-cert-file=" + files.servingCert,
			"--tls-private-key-file=" + files.servingKey,
			"--client-ca-file=" + files.caCert,
			"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
			"--service-account-key-file=" + files.saPublic,
			"--service-account-signing-key-file=" + files.saPrivate,
			"--service-cluster-ip-range=" + serviceCIDR,
			"--requestheader-client-ca-file=" + files.frontProxyCACert,
			"--requestheader-allowed-names=" + frontProxyClient,
			"--requestheader-username-headers=X-Remote-User",
			"--requestheader-group-headers=X-Remote-Group",
			"--requestheader-extra-headers-prefix=X-Remote-Extra-",
			"--proxy-client-cert-file=" + files.proxyClientCert,
			"--proxy-client-key-file=" + files.proxyClientKey,
			// RBAC only: impersonated users get exactly what their bindings say.
			"--authorization-mode=RBAC",
			// As in envtest: Pods need no ServiceAccount to exist first, so
			// tests can create Pods right after their Namespace.
			"--disable-admission-plugins=ServiceAccount",
			"--allow-privileged=true",
			// A loopback address is not a valid Endpoints address; nothing in
			// the environment talks to the apiserver through its Service.
			"--endpoint-reconciler-type=none",
			fmt.Sprintf("--profiling=%t", profiling),
		}, logDir)
		if err != nil {
			return result{}, err
		}
		cfg := rest.CopyConfig(admin)
		cfg.Host = url
		client, err := rest.HTTPClientFor(cfg)
		if err != nil {
			p.stop(time.Second)
			return result{}, fmt.Errorf("admin HTTP client: %w", err)
		}
		err = p.waitReady(ctx, startTimeout, httpCheck(client, url+"/readyz", "ok"))
		if err != nil {
			p.stop(time.Second)
			return result{}, err
		}
		return result{p, url}, nil
	})
	return r.p, r.url, err
}

// startControllerManager starts kube-controller-manager with every controller
// that is on by default, no cloud provider and no leader election, and waits
// for its /healthz.
func startControllerManager(ctx context.Context, bin, kubeconfig, caCert, saPrivate, dir, logDir string) (*process, error) {
	return startWithRetry(func() (*process, error) {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		p, err := startProcess("kube-controller-manager", bin, []string{
			"--kubeconfig=" + kubeconfig,
			"--authentication-kubeconfig=" + kubeconfig,
			"--authorization-kubeconfig=" + kubeconfig,
			"--bind-address=127.0.0.1",
			fmt.Sprintf("--secure-port=%d", port),
			"--cert-dir=" + filepath.Join(dir, "kube-controller-manager"),
			"--leader-elect=false",
			"--controllers=*",
			// The token and root CA publisher controllers need these.
			"--service-account-private-key-file=" + saPrivate,
			"--root-ca-file=" + caCert,
			"--cluster-name=instance-manager-test",
			"--kube-api-qps=100",
			"--kube-api-burst=200",
			"--profiling=false",
		}, logDir)
		if err != nil {
			return nil, err
		}
		err = p.waitReady(ctx, startTimeout, httpCheck(insecureLoopbackClient, fmt.Sprintf("https://%s/healthz", hostPort(port)), "ok"))
		if err != nil {
			p.stop(time.Second)
			return nil, err
		}
		return p, nil
	})
}

// startScheduler starts kube-scheduler with the default profile and no
// leader election, and waits for its /healthz.
func startScheduler(ctx context.Context, bin, kubeconfig, dir, logDir string) (*process, error) {
	config := filepath.Join(dir, "kube-scheduler.yaml")
	err := os.WriteFile(config, []byte(fmt.Sprintf(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: %q
  qps: 100
  burst: 200
leaderElection:
  leaderElect: false
`, kubeconfig)), 0o600)
	if err != nil {
		return nil, fmt.Errorf("write kube-scheduler configuration: %w", err)
	}
	return startWithRetry(func() (*process, error) {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		p, err := startProcess("kube-scheduler", bin, []string{
			"--config=" + config,
			"--authentication-kubeconfig=" + kubeconfig,
			"--authorization-kubeconfig=" + kubeconfig,
			"--bind-address=127.0.0.1",
			fmt.Sprintf("--secure-port=%d", port),
			"--cert-dir=" + filepath.Join(dir, "kube-scheduler"),
			"--profiling=false",
		}, logDir)
		if err != nil {
			return nil, err
		}
		err = p.waitReady(ctx, startTimeout, httpCheck(insecureLoopbackClient, fmt.Sprintf("https://%s/healthz", hostPort(port)), "ok"))
		if err != nil {
			p.stop(time.Second)
			return nil, err
		}
		return p, nil
	})
}

// insecureLoopbackClient probes the health endpoints of the controller
// manager and scheduler, which serve self-signed certificates on 127.0.0.1.
var insecureLoopbackClient = &http.Client{
	Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // loopback health probe of a process we started
		DialContext:     (&net.Dialer{Timeout: 2 * time.Second}).DialContext,
	},
}

// httpCheck returns a readiness check: GET url answers 2xx (moto answers its
// config with 201) and, when want is not empty, its body contains want.
func httpCheck(client *http.Client, url, want string) func(context.Context) error {
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer func() { _ = resp.Body.Close() }()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		if resp.StatusCode < 200 || resp.StatusCode > 299 {
			return fmt.Errorf("GET %s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
		}
		if want != "" && !strings.Contains(string(body), want) {
			return fmt.Errorf("GET %s: body %q does not contain %q", url, strings.TrimSpace(string(body)), want)
		}
		return nil
	}
}

// loopbackIPs are the addresses the apiserver's serving certificate is for.
func loopbackIPs() []net.IP { return []net.IP{net.IPv4(127, 0, 0, 1)} }

// clientConfig is a rest.Config for the apiserver at url that authenticates
// with the client certificate kp.
func clientConfig(url string, caPEM []byte, kp keyPair) *rest.Config {
	return &rest.Config{
		Host: url,
		TLSClientConfig: rest.TLSClientConfig{
			CAData:   caPEM,
			CertData: kp.certPEM,
			KeyData:  kp.keyPEM,
		},
		// Tests create many objects quickly; the local apiserver copes.
		QPS:   1000,
		Burst: 2000,
	}
}

// writeKubeconfig writes cfg (certificate authentication) as a kubeconfig
// file with embedded credentials, usable from any directory.
func writeKubeconfig(path, user string, cfg *rest.Config) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["instance-manager-test"] = &clientcmdapi.Cluster{
		Server:                   cfg.Host,
		CertificateAuthorityData: cfg.CAData,
	}
	kc.AuthInfos[user] = &clientcmdapi.AuthInfo{
		ClientCertificateData: cfg.CertData,
		ClientKeyData:         cfg.KeyData,
	}
	kc.Contexts["instance-manager-test"] = &clientcmdapi.Context{
		Cluster:  "instance-manager-test",
		AuthInfo: user,
	}
	kc.CurrentContext = "instance-manager-test"
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return fmt.Errorf("write kubeconfig %s: %w", path, err)
	}
	return nil
}
