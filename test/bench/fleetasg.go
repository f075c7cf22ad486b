package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"
)

// fleetZones are the Availability Zones the modelled groups spread over.
var fleetZones = []string{"us-west-2a", "us-west-2b", "us-west-2c"}

// fleetASG is the modelled part of the fleet figure for one group: its
// Auto Scaling group and EC2 instances, and the kubelet of each instance
// (its Node object, and the grace period of the pods evicted from it), on
// the simulation's virtual clock. The times it takes are the inputs
// (fleetInputs: Terminate, Launch, Join); everything it is asked to do
// comes from the product's code (upgrade.RollingUpdate through
// providers.Rotator). It implements providers.Rotator and
// providers.FreshLister as the eks provider does for a real group.
type fleetASG struct {
	w     *fleetWorld
	g     *fleetGroup
	name  string // the group's "namespace-name": names its instances and nodes
	ns    string
	min   int
	max   int
	want  int // desired capacity
	ver   int // the latest launch template version
	seq   int
	insts []*fleetInstance
}

// fleetInstance is one modelled EC2 instance and its Node.
type fleetInstance struct {
	id, zone, node string
	ver            int
	launched       time.Time
	inService      time.Time // Pending until then
	ready          time.Time // its Node registers Ready then
	nodeUp         bool      // the Node object exists
	leaving        bool      // Terminating until gone
	gone           time.Time
	replace        bool // terminated without a decrement: Auto Scaling launches a replacement when it is gone
}

var (
	_ providers.Rotator     = &fleetASG{}
	_ providers.FreshLister = &fleetASG{}
)

// launch starts an instance at t in the zone with the fewest instances (as
// Auto Scaling balances its zones): InService after Launch, a Ready Node
// after Join more.
func (a *fleetASG) launch(t time.Time) *fleetInstance {
	count := map[string]int{}
	for _, in := range a.insts {
		if !in.leaving {
			count[in.zone]++
		}
	}
	zone := fleetZones[0]
	for _, z := range fleetZones {
		if count[z] < count[zone] {
			zone = z
		}
	}
	a.seq++
	id := fmt.Sprintf("i-%s-%d", a.name, a.seq)
	in := &fleetInstance{id: id, zone: zone, node: "ip-" + id[2:], ver: a.ver, launched: t,
		inService: t.Add(a.w.in.Launch), ready: t.Add(a.w.in.Launch + a.w.in.Join)}
	a.insts = append(a.insts, in)
	return in
}

func (in *fleetInstance) providerID() string { return "aws:///" + in.zone + "/" + in.id }

// observe is the group as the eks provider's listing shows it at now.
func (a *fleetASG) observe(now time.Time) *providers.Observation {
	obs := &providers.Observation{GroupName: a.name, LaunchTemplateName: "lt-" + a.name, LatestTemplateVersion: strconv.Itoa(a.ver),
		Min: a.min, Max: a.max, Desired: a.want}
	for _, in := range a.insts {
		state := "InService"
		switch {
		case in.leaving:
			state = "Terminating"
		case now.Before(in.inService):
			state = "Pending"
		}
		obs.Instances = append(obs.Instances, providers.Instance{ID: in.id, ProviderID: in.providerID(), LifecycleState: state,
			Healthy: true, UpToDate: in.ver == a.ver, PrivateDNSName: in.node, LaunchTime: in.launched, Weight: 1})
	}
	return obs
}

// Terminate implements providers.Rotator: the instance is Terminating for
// Terminate, then gone (its Node and pods with it); without decrement Auto
// Scaling launches its replacement then.
func (a *fleetASG) Terminate(_ context.Context, _ *v1alpha1.InstanceGroup, id string, decrement bool) error {
	for _, in := range a.insts {
		if in.id != id || in.leaving {
			continue
		}
		if decrement {
			if a.want-1 < a.min {
				return fmt.Errorf("terminating %s with a decrement: %w", id, providers.ErrDesiredAtMinSize)
			}
			a.want--
		}
		in.leaving, in.gone, in.replace = true, a.w.now.Add(a.w.in.Terminate), !decrement
		if in.ver != a.ver {
			a.w.replaced++
		}
		return nil
	}
	return fmt.Errorf("instance %s is not in service in group %s", id, a.name)
}

// AddCapacity implements providers.Rotator: the instances launch at once.
func (a *fleetASG) AddCapacity(_ context.Context, _ *v1alpha1.InstanceGroup, delta int) (int, error) {
	if delta < 0 {
		return 0, fmt.Errorf("adding %d to group %s: %w", delta, a.name, providers.ErrScaleIn)
	}
	add := min(delta, a.max-a.want)
	a.want += add
	for range add {
		a.launch(a.w.now)
	}
	return add, nil
}

// FreshInstances implements providers.FreshLister.
func (a *fleetASG) FreshInstances(context.Context, *v1alpha1.InstanceGroup) ([]providers.Instance, error) {
	return a.observe(a.w.now).Instances, nil
}

// advance applies what happened up to now: instances gone (their Nodes
// deleted, replacements launched at that time), Nodes registered Ready,
// evicted pods past their grace period deleted (the kubelet).
func (a *fleetASG) advance(ctx context.Context, now time.Time) error {
	kept := a.insts[:0]
	var launches []time.Time
	for _, in := range a.insts {
		if in.leaving && !now.Before(in.gone) {
			if in.nodeUp {
				if err := a.w.client.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: in.node}}); client.IgnoreNotFound(err) != nil {
					return err
				}
			}
			if in.replace {
				launches = append(launches, in.gone)
			}
			continue
		}
		kept = append(kept, in)
	}
	a.insts = kept
	for _, t := range launches {
		a.launch(t)
	}
	for _, in := range a.insts {
		if in.nodeUp || in.leaving || now.Before(in.ready) {
			continue
		}
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: in.node}, Spec: corev1.NodeSpec{ProviderID: in.providerID()},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
		if err := a.w.client.Create(ctx, node); err != nil {
			return err
		}
		in.nodeUp = true
		if err := a.w.schedulePod(a, in); err != nil {
			return err
		}
	}
	return a.w.kubelet(ctx, a, now)
}

// next is the earliest modelled change after now (zero when none).
func (a *fleetASG) next(now time.Time, pods []time.Time) time.Time {
	var at time.Time
	consider := func(t time.Time) {
		if t.After(now) && (at.IsZero() || t.Before(at)) {
			at = t
		}
	}
	for _, in := range a.insts {
		if in.leaving {
			consider(in.gone)
			continue
		}
		consider(in.inService)
		if !in.nodeUp {
			consider(in.ready)
		}
	}
	for _, t := range pods {
		consider(t)
	}
	return at
}
