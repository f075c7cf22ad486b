package integration

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	awsp "github.com/instancemgr/instance-manager/providers/aws"
	"github.com/instancemgr/instance-manager/test/harness"
)

// apiServerSource is the address the local API server calls the webhooks
// from (the manager's --webhook-allowed-sources here).
const apiServerSource = "127.0.0.1/32"

// Attack 05 (N3, issue 25 item 3): a pod with no RBAC
// that calls the webhook port directly gets nothing and costs nothing. On
// a real cluster the chart's NetworkPolicy keeps it out (the local world
// has no CNI, so the policy is not enforced here: its rendered shape is
// asserted by charts/instance-manager's TestNetworkPolicy); the manager
// refuses it too, by its source address. Here the "pod" is a plain HTTPS
// client with no credentials, from 127.0.0.2: well-formed AdmissionReviews
// forging a boundary ConfigMap that names unknown roles, profiles,
// subnets and images (which used to make the manager LIST every
// InstanceGroup live and call IAM and EC2), a forged InstanceGroup review,
// a GET, junk. Each gets 403 and no admission answer; no AWS call is made
// (instance_manager_aws_api_calls_total) and the API server serves no LIST
// of InstanceGroups (its apiserver_request_total).
func TestWebhookPortUnauthenticatedCaller(t *testing.T) {
	requireEnv(t)
	ns := uniqueNamespace("team-port")
	g, ctx, tn := underBoundaries(t, nil, "port-tenant", ns)
	wio := environment.Envtest.WebhookInstallOptions
	addr := net.JoinHostPort(wio.LocalServingHost, strconv.Itoa(wio.LocalServingPort))
	pod := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, // no credentials, no CA: anyone
		DialContext:     (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}).DialContext,
	}}

	listsBefore := instanceGroupLists(t)
	callsBefore := awsp.CallCounts()
	forgedConfigMap := func(i int) []byte {
		defaults := fmt.Sprintf("spec:\n  eks:\n    configuration:\n      roleName: probe-role-%d\n      instanceProfileName: probe-profile-%d\n      subnets: [subnet-probe%d]\n      image: ami-0probe%08d\n", i, i, i, i)
		return review(map[string]any{
			"uid": fmt.Sprint("forged-", i), "operation": "UPDATE", "namespace": harness.ConfigNamespace, "name": "instance-manager",
			"kind":     map[string]any{"group": "", "version": "v1", "kind": "ConfigMap"},
			"resource": map[string]any{"group": "", "version": "v1", "resource": "configmaps"},
			"userInfo": map[string]any{"username": "kubernetes-admin", "groups": []string{"system:masters"}},
			"object": map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
				"metadata": map[string]any{"name": "instance-manager", "namespace": harness.ConfigNamespace},
				"data":     map[string]any{"defaults": defaults}},
			"oldObject": map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
				"metadata": map[string]any{"name": "instance-manager", "namespace": harness.ConfigNamespace}},
		})
	}
	type call struct {
		path, method, contentType string
		body                      []byte
	}
	var calls []call
	for i := 0; i < 20; i++ {
		calls = append(calls, call{"/validate-boundaries-configmap", http.MethodPost, "application/json", forgedConfigMap(i)})
	}
	forgedGroup := review(map[string]any{
		"uid": "forged-ig", "operation": "CREATE", "namespace": "victim", "name": "probe",
		"kind":     map[string]any{"group": "instancemgr.keikoproj.io", "version": "v1alpha1", "kind": "InstanceGroup"},
		"resource": map[string]any{"group": "instancemgr.keikoproj.io", "version": "v1alpha1", "resource": "instancegroups"},
		"userInfo": map[string]any{"username": "system:serviceaccount:victim:default"},
		"object": map[string]any{"apiVersion": "instancemgr.keikoproj.io/v1alpha1", "kind": "InstanceGroup",
			"metadata": map[string]any{"name": "probe", "namespace": "victim"},
			"spec":     map[string]any{"eks": map[string]any{"maxSize": 1, "configuration": map[string]any{"roleName": "probe-role-ig"}}}},
	})
	calls = append(calls,
		call{"/mutate-instancegroup", http.MethodPost, "application/json", forgedGroup},
		call{"/validate-instancegroup", http.MethodPost, "application/json", forgedGroup},
		call{"/validate-instancegroup", http.MethodGet, "", nil},
		call{"/validate-instancegroup", http.MethodPost, "text/plain", []byte("not a review")},
		call{"/validate-instancegroup", http.MethodPost, "application/json", bytes.Repeat([]byte("["), 6<<20)},
	)
	for _, c := range calls {
		req, err := http.NewRequest(c.method, "https://"+addr+c.path, bytes.NewReader(c.body))
		g.Expect(err).NotTo(HaveOccurred())
		if c.contentType != "" {
			req.Header.Set("Content-Type", c.contentType)
		}
		resp, err := pod.Do(req)
		if err != nil {
			// The server may close the connection on a large body it
			// refused unread: nothing was answered either way.
			t.Logf("%s %s: %v", c.method, c.path, err)
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		g.Expect(resp.StatusCode).To(Equal(http.StatusForbidden), "%s %s from 127.0.0.2: %s", c.method, c.path, body)
		g.Expect(string(body)).NotTo(ContainSubstring("AdmissionReview"), "no admission answer")
		g.Expect(string(body)).To(ContainSubstring("is not the API server"))
	}
	// Nothing was called on the caller's behalf. (Other tests' groups are
	// reconciled meanwhile; none names these made-up references, and the
	// reconciler does not read roles by name for groups that fail earlier.)
	for op, n := range awsp.CallCounts().Since(callsBefore) {
		if strings.HasPrefix(op, "IAM ") {
			t.Errorf("%v %s call(s) while a caller that is not the API server probed the webhooks", n, op)
		}
	}
	g.Expect(instanceGroupLists(t)).To(Equal(listsBefore), "the API server served LISTs of InstanceGroups")

	// The API server itself still gets answers: a tenant's (dry-run)
	// create goes through both webhooks.
	g.Expect(tn.client.Create(ctx, shortIG(ns, "through-the-api-server"), client.DryRunAll)).To(Succeed())
}

// review wraps an AdmissionRequest in an AdmissionReview.
func review(request map[string]any) []byte {
	b, err := json.Marshal(map[string]any{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request})
	if err != nil {
		panic(err)
	}
	return b
}

// instanceGroupLists is the API server's count of LIST requests for
// instancegroups (apiserver_request_total, every client and code).
func instanceGroupLists(t *testing.T) float64 {
	t.Helper()
	hc, err := rest.HTTPClientFor(environment.Config)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Get(strings.TrimSuffix(environment.Config.Host, "/") + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var n float64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "apiserver_request_total{") && strings.Contains(line, `resource="instancegroups"`) && strings.Contains(line, `verb="LIST"`) {
			v, err := strconv.ParseFloat(line[strings.LastIndex(line, " ")+1:], 64)
			if err == nil {
				n += v
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return n
}
