package app

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"time"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go/middleware"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/boundaries/store"
	"github.com/instancemgr/instance-manager/dryrun"
	"github.com/instancemgr/instance-manager/providers"
	awsp "github.com/instancemgr/instance-manager/providers/aws"
	"github.com/instancemgr/instance-manager/providers/aws/resolve"
	"github.com/instancemgr/instance-manager/providers/eks"
	"github.com/instancemgr/instance-manager/providers/eksfargate"
	"github.com/instancemgr/instance-manager/providers/eksmanaged"
	"github.com/instancemgr/instance-manager/reconciler/gc"
	"github.com/instancemgr/instance-manager/reconciler/instancegroup"
	"github.com/instancemgr/instance-manager/reconciler/interruption"
	"github.com/instancemgr/instance-manager/reconciler/nodehealth"
	"github.com/instancemgr/instance-manager/reconciler/termination"
	"github.com/instancemgr/instance-manager/reconciler/upgrade"
	"github.com/instancemgr/instance-manager/webhooks"

	"github.com/instancemgr/instance-manager/reconciler/drain"
)

// setupInstanceGroups registers the InstanceGroup state machine with the
// provisioners and the upgrade strategies.
// kube is the client the controllers write with (a dry-run client with
// --dry-run); references is the resolver's cache admission shares; dry
// records what a dry run would do (nil otherwise).
func setupInstanceGroups(mgr ctrl.Manager, kube client.Client, opts Options, st *store.Store, recorder events.EventRecorder, clients *awsp.Clients,
	references *resolve.Cache, dry *dryrun.Recorder) error {
	limits, err := opts.roleLimits()
	if err != nil {
		return err
	}
	limited := *clients
	limited.IAM = awsp.WithRoleLimits(clients.IAM, limits)
	clients = &limited
	clientset, err := kubernetes.NewForConfig(mgr.GetConfig())
	if err != nil {
		return err
	}
	drainTimeout := orDuration(opts.DrainTimeout, 10*time.Minute)
	// The drain hook on every Auto Scaling group holds a termination for
	// the drain timeout (at least the poll period, so the wait is seen).
	hookHeartbeat := awsp.DrainHookHeartbeat(drainTimeout, orDuration(opts.CloudPollPeriod, 2*time.Minute))
	eksProvisioner := eks.New(clients, kube, eks.Options{CloudResync: opts.CloudResyncPeriod, PollPeriod: opts.CloudPollPeriod,
		DrainHookHeartbeat: hookHeartbeat, NodeRoleCNIPolicy: opts.NodeRoleCNIPolicy, Reader: mgr.GetAPIReader(), References: references})
	slots, err := upgradeSlots(mgr, opts, st)
	if err != nil {
		return err
	}
	drainer := &drain.Drainer{Kube: clientset, Client: kube, Timeout: drainTimeout, Step: min(10*time.Second, drainTimeout), Now: time.Now,
		Recorder: recorder,
		// The boundary ConfigMap's data.drains as loaded now: a new
		// deadline applies to the drains under way.
		Deadline: func(group types.NamespacedName) time.Duration { return st.Get().Config.DrainDeadline(group.Namespace) }}
	if dry != nil {
		drainer.DryRun = dry
	}
	maxDrains := opts.MaxConcurrentDrains
	if maxDrains <= 0 {
		maxDrains = 20
	}
	drains := &drain.Drains{Drainer: drainer, Max: maxDrains, PerGroup: opts.MaxConcurrentDrainsPerGroup}
	if err := mgr.Add(drains); err != nil {
		return fmt.Errorf("setting up the drain runner: %w", err)
	}
	terminations := &termination.Controller{Waits: eksProvisioner, AWS: clients.AutoScaling, Client: kube, Drainer: drainer, Drains: drains,
		Recorder: recorder, Heartbeat: hookHeartbeat}
	if err := mgr.Add(terminations); err != nil {
		return fmt.Errorf("setting up the termination controller: %w", err)
	}
	if opts.InterruptionQueue != "" {
		if err := mgr.Add(&interruption.Queue{URL: opts.InterruptionQueue, SQS: clients.SQS, Handler: &interruption.Handler{
			Owners: eksProvisioner, Terminations: terminations, Client: kube, Drainer: drainer, Drains: drains, Recorder: recorder,
		}}); err != nil {
			return fmt.Errorf("setting up the interruption queue reader: %w", err)
		}
	}
	managed := eksmanaged.New(clients, eksProvisioner.Reads(), kube, eksmanaged.Options{NodeRoleCNIPolicy: opts.NodeRoleCNIPolicy, Reader: mgr.GetAPIReader()})
	fargate := eksfargate.New(clients, eksfargate.Options{Reads: eksProvisioner.Reads(), PollPeriod: opts.CloudPollPeriod, Reader: mgr.GetAPIReader()})
	// The GC's pending owners live beside the upgrade slot Leases.
	pending := &gc.Pending{Client: kube, Reader: mgr.GetAPIReader(), Namespace: opts.slotNamespace()}
	if err := mgr.Add(&gc.Collector{Client: kube, Drains: drains, Pending: pending, Collectors: map[string]providers.Collector{
		v1alpha1.ProvisionerEKS: eksProvisioner, v1alpha1.ProvisionerEKSManaged: managed, v1alpha1.ProvisionerEKSFargate: fargate,
	}, Opts: gc.Options{
		Period: orDuration(opts.GCPeriod, 10*time.Minute), Grace: orDuration(opts.GCGrace, 30*time.Minute), MaxDeletions: opts.GCMaxDeletions,
		DryRun: opts.GCDryRun, Clusters: opts.LeastPrivilege.clusters(),
	}}); err != nil {
		return fmt.Errorf("setting up the garbage collector: %w", err)
	}
	r := &instancegroup.Reconciler{
		Client:          kube,
		Reader:          mgr.GetAPIReader(),
		SpotRecommender: opts.SpotRecommender,
		Provisioners: map[string]providers.Provisioner{
			v1alpha1.ProvisionerEKS:        eksProvisioner,
			v1alpha1.ProvisionerEKSManaged: managed,
			v1alpha1.ProvisionerEKSFargate: fargate,
		},
		Rolling: &upgrade.RollingUpdate{
			Drainer:  drainer,
			Drains:   drains,
			Recorder: recorder,
			Client:   kube,
			Reader:   mgr.GetAPIReader(),
		},
		CRD:             &upgrade.CRDStrategy{Client: kube, Recorder: recorder, Boundaries: st},
		Slots:           slots,
		StallTimeout:    opts.UpgradeStallTimeout,
		NodeHealth:      &nodehealth.Repairer{Recorder: recorder, DrainAnnotation: drain.AnnotationDrainStarted},
		Recorder:        recorder,
		PollInterval:    orDuration(opts.PollInterval, 5*time.Second),
		WaitingInterval: instancegroup.DefaultWaitingInterval,
		ResyncInterval:  orDuration(opts.ResyncInterval, 5*time.Minute),

		FailureBackoffMax: opts.FailureBackoffMax,
		TransientAttempts: opts.TransientErrorAttempts, TransientGrace: opts.TransientErrorGrace,
		Boundaries: st, AllowNoBoundaries: opts.AllowNoBoundaries,
		Violations: instancegroup.BoundaryViolations(opts.ConfigNamespace),
		Quotas: func(ctx context.Context, ig *v1alpha1.InstanceGroup) ([]string, error) {
			all := &v1alpha1.InstanceGroupList{}
			if err := mgr.GetClient().List(ctx, all); err != nil {
				return nil, err
			}
			return webhooks.QuotaProblems(st.Get().Config, ig, webhooks.CreatedBefore(ig, all.Items), opts.ConfigNamespace, true), nil
		},
	}
	workers := opts.Workers
	if workers <= 0 {
		workers = 5
	}
	return r.SetupWithManager(mgr, workers)
}

// awsClients returns the AWS clients: from opts.AWS (instrumented), or
// from the default configuration chain, with apiOptions added to every
// client's middleware.
// With dry set, writes are answered locally and recorded (dryrun.Transport).
func awsClients(opts Options, dry *dryrun.Recorder, apiOptions ...func(*middleware.Stack) error) (*awsp.Clients, error) {
	cfg := opts.AWS
	if cfg == nil {
		loaded, err := awsp.LoadConfig(context.Background(), opts.AWSRegion)
		if err != nil {
			return nil, fmt.Errorf("loading the AWS configuration: %w", err)
		}
		cfg = &loaded
	} else {
		c := cfg.Copy()
		awsp.Instrument(&c)
		cfg = &c
	}
	cfg.APIOptions = append(slices.Clip(cfg.APIOptions), apiOptions...)
	if dry != nil {
		cfg.HTTPClient = &http.Client{Transport: &dryrun.Transport{Base: awshttp.NewBuildableClient().GetTransport(), Recorder: dry}}
	}
	return awsp.NewClients(*cfg), nil
}

func orDuration(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}
