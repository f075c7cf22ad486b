package chaos

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/boundaries"
	"github.com/instancemgr/instance-manager/test/harness"
)

// Settings of TestLeaderChange.
const (
	leaderNamespace = "chaos-leader"
	leaderLeaseID   = "chaos-leader-change"
	// The leader election timings of the test (production: 15s, 10s, 2s).
	leaderLease = 6 * time.Second
	leaderRenew = 4 * time.Second
	leaderRetry = time.Second
	// rotatingGroups have rotatingSize nodes each and roll in the first
	// failover; fanOutGroups have none and make the fan-out long enough to
	// be interrupted.
	rotatingGroups = 3
	rotatingSize   = 2
	fanOutGroups   = 27
	// acquiredMessage is what client-go's leader election logs on taking
	// the Lease (with the lock's namespace/name).
	acquiredMessage = "successfully acquired lease"
)

// TestLeaderChange runs two replicas (the binary, --leader-elect) behind a
// stand-in for the webhook Service (serviceProxy), kills the leader
// (SIGKILL) in the middle of a rotation and again in the middle of a
// boundary ConfigMap fan-out, and checks that the other replica takes the
// Lease unaided once it has expired (never before) and finishes the work
// (how long the takeover took is a figure), while a tenant's admission requests, sent every 50ms
// throughout, never fail: the surviving replica answers all of them but a
// request the killed one took with it (in flight on it, or sent on a
// kept-alive connection to it before the API server saw that connection
// close), which the API server reports as EOF at the kill and does not
// retry; those are counted apart. The killed replica is started again
// after each takeover, as its Deployment would, and becomes the standby.
func TestLeaderChange(t *testing.T) {
	requireEnv(t)
	ctx := context.Background()
	started := time.Now()
	args := []string{"--leader-elect", "--leader-election-id=" + leaderLeaseID, "--leader-election-namespace=" + harness.ConfigNamespace,
		"--leader-election-lease-duration=" + leaderLease.String(), "--leader-election-renew-deadline=" + leaderRenew.String(),
		"--leader-election-retry-period=" + leaderRetry.String(),
		"--poll-interval=1s", "--resync-interval=30s", "--drain-timeout=15s", "--failure-backoff-max=10s",
		"--gc-period=1h", "--gc-grace=1h", "--max-concurrent-upgrades=5", "--workers=5"}
	replicas := []*managerProcess{newReplica(t, environment.AWSEndpoint, args...), newReplica(t, environment.AWSEndpoint, args...)}
	wio := environment.Envtest.WebhookInstallOptions
	svc, err := startServiceProxy(net.JoinHostPort(wio.LocalServingHost, strconv.Itoa(wio.LocalServingPort)), replicas...)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = svc.Close() }()
	for _, r := range replicas {
		if err := r.start(ctx); err != nil {
			t.Fatal(err)
		}
	}
	defer func() {
		if t.Failed() {
			for i, r := range replicas {
				t.Logf("end of replica %d's log (%s):\n%s", i, r.logPath, tail(r.logPath, 30))
			}
		}
	}()
	leader, _, err := waitLeader(ctx, replicas, "", 2*leaderLease)
	if err != nil {
		t.Fatal(err)
	}

	data := cloud.Boundaries(cloud.AMIs[0], 5)
	if err := harness.SetBoundaries(ctx, admin, data); err != nil {
		t.Fatal(err)
	}
	// Every replica's webhooks admit against the boundaries, so every
	// replica loads them, the standby too.
	for i, r := range replicas {
		deadline := time.Now().Add(harness.BoundariesLoadTimeout)
		for !strings.Contains(r.log(), `"msg":"boundaries loaded"`) {
			if time.Now().After(deadline) {
				t.Fatalf("replica %d (pid %d, leader: %v) did not load the boundary ConfigMap within %s", i, r.pid(), r == leader, harness.BoundariesLoadTimeout)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	ensureNamespace(t, leaderNamespace)
	tenant := tenantClient(t, leaderNamespace, "leader-tenant")
	var keys, rotating []string
	iamOwners := &owners{}
	for i := 0; i < rotatingGroups+fanOutGroups; i++ {
		ig := shortGroup(leaderNamespace, fmt.Sprintf("f%02d", i), "t3.medium")
		ig.Spec.EKS.MinSize, ig.Spec.EKS.MaxSize = 0, 1
		if i < rotatingGroups {
			ig.Name = fmt.Sprintf("r%d", i)
			ig.Spec.EKS.MinSize, ig.Spec.EKS.MaxSize = rotatingSize, rotatingSize+1
			ig.Spec.Strategy = v1alpha1.AwsUpgradeStrategy{Type: v1alpha1.StrategyRollingUpdate,
				RollingUpdate: &v1alpha1.RollingUpdateStrategy{MaxUnavailable: ptr.To(intstr.FromInt32(1))}}
			rotating = append(rotating, key(ig))
		}
		if err := tenant.Create(ctx, ig); err != nil {
			t.Fatalf("creating %s: %v", key(ig), err)
		}
		keys = append(keys, key(ig))
		iamOwners.add(ig.Namespace, ig.Name)
	}
	defer deleteGroups(t, []string{leaderNamespace}, keys, 3*time.Minute)
	if pending := waitGroups(ctx, []string{leaderNamespace}, keys, 4*time.Minute, func(_ string, ig *v1alpha1.InstanceGroup) (bool, string) {
		if ig == nil {
			return false, "not found"
		}
		return ready(ig)
	}); len(pending) > 0 {
		t.Fatalf("%d groups not Ready after creation:\n  %s", len(pending), summarize(pending, 10))
	}
	t.Logf("%d groups Ready %s after the start", len(keys), time.Since(started).Round(time.Second))

	stream := startAdmissionStream(tenant, leaderNamespace, fmt.Sprintf("f%02d", rotatingGroups))
	streamDone := false
	defer func() {
		if !streamDone {
			_, _ = stream.finish()
		}
	}()
	var takeovers []time.Duration
	// failover kills the leader once trigger holds, waits for the other
	// replica to take the Lease and starts the killed one again.
	failover := func(name string, trigger func() (bool, string)) {
		t.Helper()
		deadline := time.Now().Add(2 * time.Minute)
		for {
			ok, why := trigger()
			if ok {
				t.Logf("%s: killing the leader: %s", name, why)
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the moment to kill the leader never came: %s", name, why)
			}
			time.Sleep(20 * time.Millisecond)
		}
		lease := &coordinationv1.Lease{}
		if err := admin.Get(ctx, client.ObjectKey{Namespace: harness.ConfigNamespace, Name: leaderLeaseID}, lease); err != nil {
			t.Fatal(err)
		}
		holder := ptr.Deref(lease.Spec.HolderIdentity, "")
		stream.killed(time.Now())
		pid := leader.kill()
		killed := time.Now()
		next, newHolder, err := waitLeader(ctx, replicas, holder, 2*time.Minute)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		takeover := time.Since(killed)
		takeovers = append(takeovers, takeover)
		t.Logf("%s: killed the leader (pid %d, %s); %s took the Lease %s later (pid %d)", name, pid, holder, newHolder, takeover.Round(10*time.Millisecond), next.pid())
		if problem := checkTakeover(ctx, lease, newHolder); problem != "" {
			t.Errorf("%s: %s", name, problem)
		}
		if err := leader.start(ctx); err != nil {
			t.Fatalf("%s: starting the killed replica again: %v", name, err)
		}
		leader = next
	}

	// 1. A rotation: the admin changes the image.
	data = cloud.Boundaries(cloud.AMIs[1], 5)
	if err := harness.SetBoundaries(ctx, admin, data); err != nil {
		t.Fatal(err)
	}
	failover("rotation", func() (bool, string) {
		groups, err := groupsByKey(ctx, []string{leaderNamespace})
		if err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, k := range rotating {
			ig := groups[k]
			if ig == nil {
				continue
			}
			if c := conditionOf(ig, v1alpha1.ConditionUpgrading); c != nil && c.Status == metav1.ConditionTrue {
				return true, fmt.Sprintf("%s is rotating: %s", k, c.Message)
			}
			_, why := ready(ig)
			seen = append(seen, k+": "+why)
		}
		return false, "no group rotating: " + strings.Join(seen, "; ")
	})
	converged := convergedTo(t, keys, rotating, iamOwners, data, cloud.AMIs[1], 4*time.Minute)
	t.Logf("rotation finished: %d/%d groups converged", converged, len(keys))

	// 2. A fan-out: the admin changes a default tag; every group is
	// re-admitted with it.
	data2 := map[string]string{}
	for k, v := range data {
		data2[k] = v
	}
	data2["defaults"] = strings.Replace(data["defaults"], "value: a-default-value", "value: after-failover", 1)
	cfg2, err := boundaries.Parse(data2)
	if err != nil {
		t.Fatal(err)
	}
	if err := harness.WriteBoundaries(ctx, admin, data2); err != nil {
		t.Fatal(err)
	}
	readmittedAtKill := 0
	failover("fan-out", func() (bool, string) {
		groups, err := groupsByKey(ctx, []string{leaderNamespace})
		if err != nil {
			return false, err.Error()
		}
		n := 0
		for _, ig := range groups {
			if ig.Annotations[v1alpha1.AnnotationBoundariesHash] == cfg2.Hash(false) {
				n++
			}
		}
		readmittedAtKill = n
		return n > 0, fmt.Sprintf("%d of %d groups re-admitted", n, len(keys))
	})
	if readmittedAtKill == len(keys) {
		t.Logf("the fan-out had re-admitted every group before the kill; the new leader finishes their reconciles")
	}
	converged2 := convergedTo(t, keys, rotating, iamOwners, data2, cloud.AMIs[1], 4*time.Minute)
	streamDone = true
	failures, lost := stream.finish()

	// How long each takeover took is a figure, not a check: the standby
	// looks once per retry period and waits a lease duration after the
	// last renewal it saw (lease 6 s, retry 1 s: about 6-8.4 s), but on a
	// loaded machine its looks come late (5.9-8.5 s were seen at a load
	// average of 20). What is checked is the behaviour: the takeover
	// happened unaided (waitLeader), only after the Lease had expired,
	// with the durations the flags set (checkTakeover).
	if len(failures) > 0 {
		t.Errorf("%d of %d admission requests failed during the failovers:\n  %s", len(failures), stream.sent.Load(), summarize(failures, 20))
	}
	if len(lost) > 0 {
		t.Logf("%d request(s) lost with the killed replica (their connection cut at the kill):\n  %s", len(lost), summarize(lost, 10))
	}
	worst := time.Duration(0)
	for _, d := range takeovers {
		worst = max(worst, d)
	}
	t.Logf("admission requests: %d sent, %d conflicts re-read; connections per replica: %v", stream.sent.Load(), stream.conflicts.Load(), svc.connections())
	figure(t, "leader_takeover_seconds", fmt.Sprintf("%.1f", worst.Seconds()))
	figure(t, "leader_lease_duration_seconds", leaderLease.Seconds())
	figure(t, "admission_requests_during_failover", stream.sent.Load())
	figure(t, "admission_failures_during_failover", len(failures))
	figure(t, "admission_requests_lost_with_killed_replica", len(lost))
	figure(t, "fan_out_readmitted_at_kill", fmt.Sprintf("%d/%d", readmittedAtKill, len(keys)))
	figure(t, "groups_converged_after_failover", fmt.Sprintf("%d/%d", min(converged, converged2), len(keys)))
	figure(t, "leader_change_seconds", int(time.Since(started).Seconds()))
}

// checkTakeover reads the Lease after newHolder took it from the holder
// recorded in before (read just before the kill) and returns what is
// wrong with the takeover, or "" if nothing is: the Lease must carry the
// durations given by --leader-election-lease-duration, name newHolder,
// count one more transition, and have been acquired no earlier than a
// lease duration after the killed holder's last renewal seen in before
// (the killed holder may have renewed once more after that read, so this
// is a lower bound of what client-go guarantees: the standby waits a
// lease duration from when it saw the last renewal, which is no earlier
// than the renewal itself). Both times come from clocks of this machine.
func checkTakeover(ctx context.Context, before *coordinationv1.Lease, newHolder string) string {
	after := &coordinationv1.Lease{}
	if err := admin.Get(ctx, client.ObjectKeyFromObject(before), after); err != nil {
		return "reading the Lease after the takeover: " + err.Error()
	}
	if d := ptr.Deref(after.Spec.LeaseDurationSeconds, 0); time.Duration(d)*time.Second != leaderLease {
		return fmt.Sprintf("the Lease's leaseDurationSeconds is %d; --leader-election-lease-duration=%s was not honoured", d, leaderLease)
	}
	if h := ptr.Deref(after.Spec.HolderIdentity, ""); h != newHolder {
		// A later takeover (the new holder killed already) is not this
		// check's business; waitLeader returned newHolder.
		return ""
	}
	if a, b := ptr.Deref(after.Spec.LeaseTransitions, 0), ptr.Deref(before.Spec.LeaseTransitions, 0); a <= b {
		return fmt.Sprintf("the Lease's leaseTransitions went from %d to %d on a change of holder", b, a)
	}
	if before.Spec.RenewTime == nil || after.Spec.AcquireTime == nil {
		return fmt.Sprintf("the Lease lacks renewTime (before: %v) or acquireTime (after: %v)", before.Spec.RenewTime, after.Spec.AcquireTime)
	}
	expiry := before.Spec.RenewTime.Add(leaderLease)
	if acquired := after.Spec.AcquireTime.Time; acquired.Before(expiry) {
		return fmt.Sprintf("%s acquired the Lease at %s, before it expired (renewed by the killed leader at %s, lease %s): two leaders at once",
			newHolder, acquired.Format("15:04:05.000000"), before.Spec.RenewTime.Format("15:04:05.000000"), leaderLease)
	}
	return ""
}

// waitLeader waits until the Lease names a holder other than notHolder and
// a running replica's log says it acquired it, and returns that replica
// and the holder.
func waitLeader(ctx context.Context, replicas []*managerProcess, notHolder string, timeout time.Duration) (*managerProcess, string, error) {
	deadline := time.Now().Add(timeout)
	seen := "no Lease"
	for {
		lease := &coordinationv1.Lease{}
		err := admin.Get(ctx, client.ObjectKey{Namespace: harness.ConfigNamespace, Name: leaderLeaseID}, lease)
		if err == nil {
			holder := ptr.Deref(lease.Spec.HolderIdentity, "")
			seen = "holder " + holder
			if holder != "" && holder != notHolder {
				for _, r := range replicas {
					if r.pid() != 0 && acquired(r.log()) {
						return r, holder, nil
					}
				}
				seen += ", but no running replica's log says " + acquiredMessage
			}
		} else {
			seen = err.Error()
		}
		if time.Now().After(deadline) {
			return nil, "", fmt.Errorf("no replica took the Lease %s/%s within %s: %s", harness.ConfigNamespace, leaderLeaseID, timeout, seen)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// acquired reports whether a log has a line saying the Lease was taken.
func acquired(log string) bool {
	lock := harness.ConfigNamespace + "/" + leaderLeaseID
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(strings.ToLower(line), acquiredMessage) && strings.Contains(line, lock) {
			return true
		}
	}
	return false
}

// convergedTo waits until every group is Ready on the boundaries data
// (its boundaries-hash) and image, and the rotating groups' instances all
// run that image, and returns how many did.
func convergedTo(t *testing.T, keys, rotating []string, iamOwners *owners, data map[string]string, image string, timeout time.Duration) int {
	t.Helper()
	ctx := context.Background()
	cfg, err := boundaries.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	hash := cfg.Hash(false)
	isRotating := map[string]bool{}
	for _, k := range rotating {
		isRotating[k] = true
	}
	var inv inventory
	var invErr error
	pending := waitGroups(ctx, []string{leaderNamespace}, keys, timeout, func(k string, ig *v1alpha1.InstanceGroup) (bool, string) {
		if k == keys[0] {
			inv, invErr = readInventory(ctx, environment.AWS, iamOwners)
		}
		if ig == nil {
			return false, "not found"
		}
		if h := ig.Annotations[v1alpha1.AnnotationBoundariesHash]; h != hash {
			return false, "boundaries hash " + h
		}
		if img := ig.Spec.EKS.Configuration.Image; img != image {
			return false, "spec image " + img
		}
		if ok, why := ready(ig); !ok {
			return false, why
		}
		if !isRotating[k] {
			return true, ""
		}
		if invErr != nil {
			return false, invErr.Error()
		}
		live := inv.instances[ig.Status.ActiveScalingGroupName]
		if len(live) != rotatingSize {
			return false, fmt.Sprintf("%d instances: %v", len(live), live)
		}
		for _, in := range live {
			if in.image != image {
				return false, fmt.Sprintf("instance %s runs %s", in.id, in.image)
			}
		}
		return true, ""
	})
	if len(pending) > 0 {
		t.Errorf("%d of %d groups not converged to the boundaries %s (image %s):\n  %s", len(pending), len(keys), hash, image, summarize(pending, 10))
	}
	return len(keys) - len(pending)
}
