package integration

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/instancemgr/instance-manager/app"
)

// The manager's metrics endpoint, configured as app.NewManager configures
// it, refuses a scrape without credentials and does not speak HTTP/2.
func TestMetricsEndpointRefusesAnUnauthenticatedScrape(t *testing.T) {
	requireEnv(t)
	g := NewWithT(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	addr := l.Addr().String()
	g.Expect(l.Close()).To(Succeed())

	httpClient, err := rest.HTTPClientFor(environment.Config)
	g.Expect(err).NotTo(HaveOccurred())
	srv, err := metricsserver.NewServer(app.MetricsOptions(addr), environment.Config, httpClient)
	g.Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Start(ctx) }()
	defer func() { cancel(); <-done }()

	scraper := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, // self-signed serving certificate
		ForceAttemptHTTP2: true,
	}}
	var resp *http.Response
	g.Eventually(func() error {
		r, err := scraper.Get(fmt.Sprintf("https://%s/metrics", addr))
		if err != nil {
			return err
		}
		resp = r
		return r.Body.Close()
	}, 60*time.Second, 200*time.Millisecond).Should(Succeed(), "the metrics server at %s did not answer", addr)
	g.Expect(resp.StatusCode).To(Equal(http.StatusUnauthorized), "an anonymous scrape of /metrics")
	g.Expect(resp.Proto).To(Equal("HTTP/1.1"), "HTTP/2 is off")

	// Plain HTTP is not served at all.
	plain := &http.Client{Timeout: 10 * time.Second}
	if r, err := plain.Get(fmt.Sprintf("http://%s/metrics", addr)); err == nil {
		_ = r.Body.Close()
		g.Expect(r.StatusCode).To(Equal(http.StatusBadRequest), "plain HTTP to the TLS port")
	}
}

// The webhook server speaks HTTP/1.1 only, whatever the client offers.
func TestWebhookServerHasNoHTTP2(t *testing.T) {
	requireEnv(t)
	g := NewWithT(t)
	wio := environment.Envtest.WebhookInstallOptions
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, // the test's serving certificate
		ForceAttemptHTTP2: true,
	}}
	resp, err := client.Get(fmt.Sprintf("https://%s/validate-instancegroup", net.JoinHostPort(wio.LocalServingHost, fmt.Sprint(wio.LocalServingPort))))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(resp.Body.Close()).To(Succeed())
	g.Expect(resp.Proto).To(Equal("HTTP/1.1"), "HTTP/2 is off on the webhook server")
}
