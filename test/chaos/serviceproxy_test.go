package chaos

import (
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// serviceProxy stands in for the webhook Service in front of several
// replicas: a TCP proxy on the address the webhook configurations name,
// spreading connections round-robin over the replicas' webhook ports.
//
// It is layer 4, as kube-proxy is: TLS passes through (the API server
// checks the replicas' own certificate), a connection stays with the
// replica it was given, and a connection to a replica that dies is cut,
// never replayed on another. Like a Service it sends new connections only
// to ready replicas: it probes each replica's /readyz every 200ms (the
// kubelet's readiness probe and the EndpointSlice update, faster) and,
// besides, skips a replica that refuses the connection (a process that
// just died, before a probe noticed).
type serviceProxy struct {
	l        net.Listener
	backends []proxyBackend
	next     atomic.Uint64

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	stop   chan struct{}
	wg     sync.WaitGroup
}

type proxyBackend struct {
	addr, readyz string
	ready        *atomic.Bool
	served       *atomic.Int64
}

// startServiceProxy listens on addr and proxies to the replicas, each
// given as its webhook address and its health probe address.
func startServiceProxy(addr string, replicas ...*managerProcess) (*serviceProxy, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	p := &serviceProxy{l: l, conns: map[net.Conn]struct{}{}, stop: make(chan struct{})}
	for _, m := range replicas {
		p.backends = append(p.backends, proxyBackend{addr: m.webhookAddr, readyz: "http://" + m.healthAddr + "/readyz",
			ready: &atomic.Bool{}, served: &atomic.Int64{}})
	}
	p.wg.Add(2)
	go p.probe()
	go p.accept()
	return p, nil
}

func (p *serviceProxy) probe() {
	defer p.wg.Done()
	hc := &http.Client{Timeout: time.Second}
	for {
		for _, b := range p.backends {
			resp, err := hc.Get(b.readyz)
			ok := err == nil && resp.StatusCode == http.StatusOK
			if err == nil {
				_ = resp.Body.Close()
			}
			b.ready.Store(ok)
		}
		select {
		case <-p.stop:
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (p *serviceProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		if !p.track(c, true) {
			_ = c.Close()
			return
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			defer p.track(c, false)
			p.serve(c)
		}()
	}
}

// track adds or removes a connection; false once the proxy is closed.
func (p *serviceProxy) track(c net.Conn, add bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !add {
		delete(p.conns, c)
		return true
	}
	if p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

// serve connects c to the next ready replica that accepts, and copies
// both ways until either side closes; then it closes both, so that the
// API server sees a dead replica's connections end at once.
func (p *serviceProxy) serve(c net.Conn) {
	defer func() { _ = c.Close() }()
	start := int(p.next.Add(1))
	var up net.Conn
	for i := 0; i < len(p.backends) && up == nil; i++ {
		b := p.backends[(start+i)%len(p.backends)]
		if !b.ready.Load() {
			continue
		}
		conn, err := net.DialTimeout("tcp", b.addr, time.Second)
		if err != nil {
			b.ready.Store(false) // until the next probe says otherwise
			continue
		}
		b.served.Add(1)
		up = conn
	}
	if up == nil {
		return // no ready replica: the caller sees the connection closed, as with a Service without endpoints
	}
	defer func() { _ = up.Close() }()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go pipe(up, c)
	go pipe(c, up)
	<-done
}

// connections returns how many connections each replica was given.
func (p *serviceProxy) connections() []int64 {
	out := make([]int64, len(p.backends))
	for i, b := range p.backends {
		out[i] = b.served.Load()
	}
	return out
}

// Close stops listening and cuts every connection.
func (p *serviceProxy) Close() error {
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	err := p.l.Close()
	close(p.stop)
	p.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}
