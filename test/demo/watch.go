package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/app"
	"github.com/instancemgr/instance-manager/test/env"
)

// group is one InstanceGroup as the demo shows it.
type group struct {
	key                     types.NamespacedName
	exists                  bool
	state, ready, upgrading string // status.currentState, Ready and Upgrading conditions
	image                   string // spec.eks.configuration.image
	min                     int64  // spec.eks.minSize
	updated, total          int    // status.nodesUpdated / nodesTotal
	readyNodes              int    // Ready nodes labelled for the group
	nodeImages              []string
	podsAvailable, podsWant int32  // the tenant's app Deployment
	revision, pending       string // status.boundaries: the revision it runs, the one it waits for
}

// stateCordoned is a cordoned node's status, as kubectl shows it.
const stateCordoned = "Ready,SchedulingDisabled"

// node is one Node of a demo group.
type node struct {
	name, group, state string // state: Ready, NotReady, SchedulingDisabled
	labels             map[string]string
	instance, image    string
}

// snapshot is what one look at the cluster saw.
type snapshot struct {
	groups []group
	nodes  map[string]node
}

// group returns the snapshot's view of key.
func (s *snapshot) group(key types.NamespacedName) group {
	for _, g := range s.groups {
		if g.key == key {
			return g
		}
	}
	return group{key: key}
}

// watcher looks at the cluster every tick as the admin and prints what
// changed: the InstanceGroup table (kubectl get ig -A), nodes joining,
// being cordoned and leaving (kubectl get nodes -L), and Events about the
// groups and the boundary ConfigMap (kubectl get events -w).
type watcher struct {
	d         *demo
	admin     client.Client
	ec2       *ec2.Client
	keys      []types.NamespacedName // the tenants' groups, in order
	app       string                 // name of the tenants' Deployment
	labelCols []string               // node label columns

	lastTable    string
	nodes        map[string]node
	images       map[string]string // AMI by instance id
	seenEvents   map[types.UID]bool
	eventsSince  time.Time
	printedNodes bool

	// counters since resetCounters
	drains, nodesLeft int
	minPods           int32
}

func newWatcher(d *demo, admin client.Client, cfg aws.Config, keys []types.NamespacedName, app string, labelCols []string) *watcher {
	return &watcher{d: d, admin: admin, ec2: ec2.NewFromConfig(cfg), keys: keys, app: app, labelCols: labelCols,
		nodes: map[string]node{}, images: map[string]string{}, seenEvents: map[types.UID]bool{}, eventsSince: time.Now(), minPods: 1 << 30}
}

func (w *watcher) resetCounters() { w.drains, w.nodesLeft, w.minPods = 0, 0, 1<<30 }

// until looks every 500ms, printing changes, until done holds for a
// snapshot, and returns it. Errors: ctx ending, or timeout (the error
// shows the last table).
func (w *watcher) until(ctx context.Context, timeout time.Duration, what string, done func(*snapshot) bool) (*snapshot, error) {
	deadline := time.Now().Add(timeout)
	var lastErr error
	for {
		s, err := w.look(ctx)
		if err == nil && done(s) {
			// The Events of the last changes are recorded a moment
			// after them: show them in this step.
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
				_, _ = w.look(ctx)
			}
			return s, nil
		}
		if err != nil {
			lastErr = err
		}
		if time.Now().After(deadline) {
			if lastErr != nil {
				return nil, fmt.Errorf("%s did not happen within %s (last error: %v); last table:\n%s", what, timeout, lastErr, w.lastTable)
			}
			return nil, fmt.Errorf("%s did not happen within %s; last table:\n%s", what, timeout, w.lastTable)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// look takes a snapshot and prints what changed since the last one.
func (w *watcher) look(ctx context.Context) (*snapshot, error) {
	if err := w.printEvents(ctx); err != nil {
		return nil, err
	}
	s := &snapshot{nodes: map[string]node{}}
	nodes := &corev1.NodeList{}
	if err := w.admin.List(ctx, nodes, client.HasLabels{v1alpha1.LabelInstanceGroup}); err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	var unknown []string
	for i := range nodes.Items {
		n := &nodes.Items[i]
		v := node{name: n.Name, labels: n.Labels, instance: n.Annotations[env.BridgeInstanceAnnotation],
			group: n.Labels[v1alpha1.LabelInstanceGroupNamespace] + "/" + n.Labels[v1alpha1.LabelInstanceGroup], state: "NotReady"}
		if nodeReady(n) {
			v.state = "Ready"
		}
		if n.Spec.Unschedulable {
			v.state = stateCordoned
		}
		if _, ok := w.images[v.instance]; !ok && v.instance != "" {
			unknown = append(unknown, v.instance)
		}
		s.nodes[n.Name] = v
	}
	if len(unknown) > 0 {
		out, err := w.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: unknown})
		if err != nil {
			return nil, fmt.Errorf("ec2 DescribeInstances: %w", err)
		}
		for _, r := range out.Reservations {
			for _, in := range r.Instances {
				w.images[aws.ToString(in.InstanceId)] = aws.ToString(in.ImageId)
			}
		}
	}
	for name, v := range s.nodes {
		v.image = w.images[v.instance]
		s.nodes[name] = v
	}
	w.printNodes(s.nodes)

	for _, key := range w.keys {
		g := group{key: key}
		ig := &v1alpha1.InstanceGroup{}
		err := w.admin.Get(ctx, key, ig)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return nil, fmt.Errorf("getting InstanceGroup %s: %w", key, err)
		default:
			g.exists = true
			g.state = ig.Status.CurrentState
			g.ready, g.upgrading = condition(ig, v1alpha1.ConditionReady), condition(ig, v1alpha1.ConditionUpgrading)
			if ig.Spec.EKS != nil {
				g.min = ig.Spec.EKS.MinSize
				if ig.Spec.EKS.Configuration != nil {
					g.image = ig.Spec.EKS.Configuration.Image
				}
			}
			g.updated, g.total = ig.Status.NodesUpdated, ig.Status.NodesTotal
			if b := ig.Status.Boundaries; b != nil {
				g.revision, g.pending = b.Revision, b.PendingRevision
			}
		}
		for _, n := range s.nodes {
			if n.group == key.String() {
				if n.state == "Ready" {
					g.readyNodes++
				}
				g.nodeImages = append(g.nodeImages, n.image)
			}
		}
		d := &appsv1.Deployment{}
		if err := w.admin.Get(ctx, types.NamespacedName{Namespace: key.Namespace, Name: w.app}, d); err == nil {
			g.podsAvailable, g.podsWant = d.Status.AvailableReplicas, ptrValue(d.Spec.Replicas)
			if g.exists {
				w.minPods = min(w.minPods, g.podsAvailable)
			}
		}
		s.groups = append(s.groups, g)
	}
	w.printTable(s)
	return s, nil
}

func ptrValue(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}

func condition(ig *v1alpha1.InstanceGroup, typ string) string {
	for _, c := range ig.Status.Conditions {
		if c.Type == typ {
			return string(c.Status)
		}
	}
	return ""
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// printTable prints the InstanceGroup table when it changed.
func (w *watcher) printTable(s *snapshot) {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAMESPACE\tNAME\tSTATE\tREADY\tNODES\tUPDATED\tIMAGE\tBOUNDARIES\tPENDING\tAPP PODS")
	rows := 0
	for _, g := range s.groups {
		if !g.exists {
			continue
		}
		rows++
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d/%d Ready\t%d/%d\t%s\t%s\t%s\t%d/%d\n", g.key.Namespace, g.key.Name, orDash(g.state), orDash(g.ready),
			g.readyNodes, g.min, g.updated, g.total, w.d.imageLabel(g.image), orDash(g.revision), orDash(g.pending), g.podsAvailable, g.podsWant)
	}
	_ = tw.Flush()
	table := b.String()
	if rows == 0 {
		table = "No resources found\n"
	}
	if table == w.lastTable {
		return
	}
	w.lastTable = table
	w.d.printf("kubectl get ig -A")
	w.d.block(table)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// printNodes prints a line for each node that became Ready, was cordoned
// or went away.
func (w *watcher) printNodes(now map[string]node) {
	names := make([]string, 0, len(now))
	for name := range now {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		n := now[name]
		old, seen := w.nodes[name]
		switch {
		case n.state == "Ready" && (!seen || old.state != "Ready"):
			w.nodeLine(n)
		case n.state == stateCordoned && (!seen || old.state != stateCordoned):
			w.nodeLine(n)
		default:
			if !seen && n.state == "NotReady" {
				// Registered, not Ready yet: shown once Ready.
				continue
			}
		}
		w.nodes[name] = n
	}
	var gone []string
	for name := range w.nodes {
		if _, ok := now[name]; !ok {
			gone = append(gone, name)
		}
	}
	sort.Strings(gone)
	for _, name := range gone {
		n := w.nodes[name]
		n.state = "Deleted (instance gone)"
		w.nodeLine(n)
		w.nodesLeft++
		delete(w.nodes, name)
	}
}

// nodeLine prints one node like `kubectl get nodes -L <labels>` would,
// with what happened to it as its status.
func (w *watcher) nodeLine(n node) {
	cols := func(name, status, group string, labels []string, typ, image string) string {
		line := fmt.Sprintf("%-26s %-25s %-25s", name, status, group)
		for i, l := range labels {
			line += fmt.Sprintf(" %-*s", max(len(w.labelCols[i]), 5), l)
		}
		return line + fmt.Sprintf(" %-9s %s", typ, image)
	}
	if !w.printedNodes {
		w.printedNodes = true
		var headers []string
		for _, l := range w.labelCols {
			headers = append(headers, strings.ToUpper(l))
		}
		w.d.printf("%s", cols("NODE", "STATUS", "INSTANCEGROUP", headers, "TYPE", "IMAGE"))
	}
	var values []string
	for _, l := range w.labelCols {
		values = append(values, orDash(n.labels[l]))
	}
	image := "-"
	if n.image != "" {
		image = "?"
		for i, a := range w.d.cloud.AMIs {
			if a == n.image {
				image = string(rune('A' + i))
			}
		}
	}
	w.d.printf("%s", cols(n.name, n.state, n.group, values, orDash(n.labels[corev1.LabelInstanceTypeStable]), image))
}

// printEvents prints the Events about the groups and the boundary
// ConfigMap that appeared since the last look, oldest first.
func (w *watcher) printEvents(ctx context.Context) error {
	namespaces := map[string]bool{w.d.configNamespace: true}
	for _, k := range w.keys {
		namespaces[k.Namespace] = true
	}
	var fresh []eventsv1.Event
	for ns := range namespaces {
		list := &eventsv1.EventList{}
		if err := w.admin.List(ctx, list, client.InNamespace(ns)); err != nil {
			return fmt.Errorf("listing Events in %s: %w", ns, err)
		}
		for _, e := range list.Items {
			if w.seenEvents[e.UID] {
				continue
			}
			relevant := e.Regarding.Kind == "InstanceGroup" || (e.Regarding.Kind == "ConfigMap" && e.Regarding.Name == app.ConfigMapName)
			if !relevant || eventTime(e).Before(w.eventsSince) {
				w.seenEvents[e.UID] = true
				continue
			}
			w.seenEvents[e.UID] = true
			fresh = append(fresh, e)
		}
	}
	sort.SliceStable(fresh, func(i, j int) bool { return eventTime(fresh[i]).Before(eventTime(fresh[j])) })
	// Identical Events seen together are shown once with a count, as
	// kubectl shows a series.
	var lines []string
	count := map[string]int{}
	for _, e := range fresh {
		if e.Reason == "NodeDrained" {
			w.drains++
		}
		kind := "event"
		if e.Type == corev1.EventTypeWarning {
			kind = "WARNING"
		}
		line := fmt.Sprintf("%-7s %s/%s %s: %s", kind, e.Regarding.Namespace, e.Regarding.Name, e.Reason, e.Note)
		if count[line] == 0 {
			lines = append(lines, line)
		}
		count[line]++
	}
	for _, line := range lines {
		if n := count[line]; n > 1 {
			line += fmt.Sprintf(" (x%d)", n)
		}
		w.d.printf("%s", line)
	}
	return nil
}

func eventTime(e eventsv1.Event) time.Time {
	if !e.EventTime.IsZero() {
		return e.EventTime.Time
	}
	if e.DeprecatedLastTimestamp.Time.After(e.CreationTimestamp.Time) {
		return e.DeprecatedLastTimestamp.Time
	}
	return e.CreationTimestamp.Time
}
