// Package imagepins is the image pin controller: on the leader, it
// resolves the values the eks groups' image references stand for (the
// Kubernetes version of each cluster "latest" groups join, through EKS
// DescribeCluster; the AMI id under each SSM parameter they need, through
// SSM GetParameter) and writes them into the rollout record
// (boundaries.KeyPins). The boundary ConfigMap controller makes them part
// of the boundaries revision, so that a newly published AMI or a
// control-plane upgrade is a new revision: it reaches the groups in the
// rollout policy's waves, with soak, halt and rollback, like the admin's
// change (review reconciler-providers-2026-11-26, H6; issue 29 item 1).
//
// need.go says what the groups need, decide.go whether the pins change;
// this file reads AWS and writes the record.
package imagepins

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/boundaries"
	"github.com/instancemgr/instance-manager/boundaries/store"
)

// Event reasons, on the boundary ConfigMap.
const (
	// ReasonPinsChanged: a resolved value changed; a new boundaries
	// revision rolls it out.
	ReasonPinsChanged = "ImagePinsChanged"
	// ReasonPinsAdded: references a group started using are pinned.
	ReasonPinsAdded = "ImagePinsAdded"
	// ReasonPinsCleared: no group uses an image reference any more.
	ReasonPinsCleared = "ImagePinsCleared"
	// ReasonResolveFailed (Warning): a lookup failed; the pins in force
	// stay, the lookup is retried with backoff.
	ReasonResolveFailed = "ImagePinsResolveFailed"
)

// DefaultPeriod is how often the values are resolved again: AWS publishes
// EKS-optimized AMIs every few weeks, so 10 minutes notices a new one
// soon at one DescribeCluster per cluster and one GetParameter per
// parameter in use, whatever the number of groups.
const DefaultPeriod = 10 * time.Minute

// EKS and SSM are the calls the controller makes.
type EKS interface {
	DescribeCluster(ctx context.Context, in *eks.DescribeClusterInput, optFns ...func(*eks.Options)) (*eks.DescribeClusterOutput, error)
}
type SSM interface {
	GetParameter(ctx context.Context, in *ssm.GetParameterInput, optFns ...func(*ssm.Options)) (*ssm.GetParameterOutput, error)
}

// Reconciler keeps the pins of the rollout record up to date. One key;
// reconciled on InstanceGroup changes (a group starting to use a
// reference is pinned at once) and every Period.
type Reconciler struct {
	// Client reads InstanceGroups (cache) and the boundary ConfigMap, and
	// writes the record.
	Client client.Client
	// Record reads the one record ConfigMap RecordName (its cache, see
	// app).
	Record     client.Reader
	RecordName types.NamespacedName
	// ConfigMap is the boundary ConfigMap, which Events are about.
	ConfigMap types.NamespacedName
	Store     *store.Store
	EKS       EKS
	SSM       SSM
	Recorder  events.EventRecorder
	// Period is DefaultPeriod when 0.
	Period time.Duration
	Now    func() time.Time

	// checked is when every value was last resolved; failed the last
	// failure reported ("" after a success). One worker: no lock.
	checked time.Time
	failed  string
}

// Reconcile resolves what the groups need, when a group needs something
// not pinned yet or Period has passed, and writes the pins when they
// change (decide). Errors: reading or writing the cluster, and AWS
// lookups that failed for a reason other than "does not exist" (the pins
// in force stay; retried with backoff).
func (r *Reconciler) Reconcile(ctx context.Context, _ ctrl.Request) (ctrl.Result, error) {
	st := r.Store.Get()
	if !st.Loaded || st.Config == nil {
		return ctrl.Result{}, nil // no boundaries, no revisions: the provisioner resolves references itself
	}
	igs := &v1alpha1.InstanceGroupList{}
	if err := r.Client.List(ctx, igs, client.UnsafeDisableDeepCopy); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing InstanceGroups: %w", err)
	}
	n := needs(igs.Items, st.Config)
	cm := &corev1.ConfigMap{}
	switch err := r.Record.Get(ctx, r.RecordName, cm); {
	case apierrors.IsNotFound(err):
		cm = nil
	case err != nil:
		return ctrl.Result{}, fmt.Errorf("reading the rollout record %s: %w", r.RecordName, err)
	}
	var old *boundaries.Pins
	if cm != nil {
		var err error
		if old, err = boundaries.DecodePins(cm.Data[boundaries.KeyPins]); err != nil {
			log.FromContext(ctx).Error(err, "the pins of the rollout record do not parse; they are resolved again", "record", r.RecordName)
		}
	}
	now := r.now()
	due := now.Sub(r.checked) >= r.period()
	if !due && !n.missing(old) && !(n.empty() && !old.Empty()) {
		return ctrl.Result{RequeueAfter: r.period() - now.Sub(r.checked)}, nil
	}
	fresh, lookupErr := r.resolve(ctx, n, old)
	d := decide(old, fresh)
	if d.write {
		if err := r.write(ctx, cm, fresh); err != nil {
			if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
				return ctrl.Result{RequeueAfter: 200 * time.Millisecond}, nil
			}
			return ctrl.Result{}, fmt.Errorf("writing the pins into the rollout record %s: %w", r.RecordName, err)
		}
		r.announce(ctx, d)
	}
	pinned.Set(float64(len(fresh.Images)))
	if lookupErr != nil {
		r.reportFailure(ctx, lookupErr)
		return ctrl.Result{}, lookupErr
	}
	r.failed = ""
	if due || r.checked.IsZero() {
		r.checked = now
	}
	return ctrl.Result{RequeueAfter: r.period()}, nil
}

// resolve looks up every cluster version and parameter n needs; values
// whose lookup failed keep old's (carry), and the failures are joined in
// the error. A cluster or parameter that does not exist is left out: the
// group's own reconcile reports it (a *providers.SpecError).
func (r *Reconciler) resolve(ctx context.Context, n need, old *boundaries.Pins) (*boundaries.Pins, error) {
	fresh := &boundaries.Pins{}
	var errs []error
	var failedClusters, failedParams []string
	for _, name := range n.clusters() {
		out, err := r.EKS.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: awssdk.String(name)})
		var nf *ekstypes.ResourceNotFoundException
		lookups.WithLabelValues("DescribeCluster", result(err, errors.As(err, &nf))).Inc()
		switch {
		case nf != nil:
		case err != nil:
			failedClusters = append(failedClusters, name)
			errs = append(errs, fmt.Errorf("eks DescribeCluster %s: %w", name, err))
		case out.Cluster != nil && awssdk.ToString(out.Cluster.Version) != "":
			if fresh.ClusterVersions == nil {
				fresh.ClusterVersions = map[string]string{}
			}
			fresh.ClusterVersions[name] = awssdk.ToString(out.Cluster.Version)
		}
	}
	versions := carry(old, fresh, failedClusters, nil).ClusterVersions
	for _, param := range n.parameters(versions) {
		out, err := r.SSM.GetParameter(ctx, &ssm.GetParameterInput{Name: awssdk.String(param)})
		var nf *ssmtypes.ParameterNotFound
		lookups.WithLabelValues("GetParameter", result(err, errors.As(err, &nf))).Inc()
		switch {
		case nf != nil:
		case err != nil:
			failedParams = append(failedParams, param)
			errs = append(errs, fmt.Errorf("ssm GetParameter %s: %w", param, err))
		case out.Parameter != nil && awssdk.ToString(out.Parameter.Value) != "":
			if fresh.Images == nil {
				fresh.Images = map[string]string{}
			}
			fresh.Images[param] = awssdk.ToString(out.Parameter.Value)
		}
	}
	return carry(old, fresh, failedClusters, failedParams), errors.Join(errs...)
}

// write sets the record's pins key (removes it for no pins), creating the
// record when there is none yet.
func (r *Reconciler) write(ctx context.Context, cm *corev1.ConfigMap, pins *boundaries.Pins) error {
	enc := pins.Encode()
	if cm == nil {
		if enc == "" {
			return nil
		}
		return r.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			Namespace: r.RecordName.Namespace, Name: r.RecordName.Name,
			Labels: map[string]string{"app.kubernetes.io/managed-by": "instance-manager"},
		}, Data: map[string]string{boundaries.KeyPins: enc}})
	}
	cm = cm.DeepCopy()
	if enc == "" {
		delete(cm.Data, boundaries.KeyPins)
	} else {
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		cm.Data[boundaries.KeyPins] = enc
	}
	return r.Client.Update(ctx, cm)
}

// announce sends the Event of a written change and counts it.
func (r *Reconciler) announce(ctx context.Context, d decision) {
	changes.WithLabelValues(d.kind).Inc()
	var each []string
	for i, c := range d.changes {
		if i == 10 {
			each = append(each, fmt.Sprintf("and %d more", len(d.changes)-i))
			break
		}
		each = append(each, c.String())
	}
	reason, msg := ReasonPinsAdded, "image references groups started using are pinned (the groups already pinned keep their AMIs): "
	switch d.kind {
	case changeValues:
		reason, msg = ReasonPinsChanged, "AWS resolves image references to other values now; a new boundaries revision rolls them out in the rollout's waves: "
	case changeCleared:
		reason, msg = ReasonPinsCleared, "no group uses an image reference any more; the pins are removed: "
	}
	msg += strings.Join(each, "; ")
	log.FromContext(ctx).Info(msg, "reason", reason)
	r.event(ctx, corev1.EventTypeNormal, reason, msg)
}

// reportFailure sends a Warning Event once per distinct failure.
func (r *Reconciler) reportFailure(ctx context.Context, err error) {
	if err.Error() == r.failed {
		return
	}
	r.failed = err.Error()
	r.event(ctx, corev1.EventTypeWarning, ReasonResolveFailed,
		"resolving image references failed; the values pinned before stay in force and the lookup is retried: "+err.Error())
}

func (r *Reconciler) event(ctx context.Context, kind, reason, msg string) {
	if r.Recorder == nil {
		return
	}
	about := &corev1.ConfigMap{}
	if err := r.Client.Get(ctx, r.ConfigMap, about); err != nil {
		log.FromContext(ctx).Error(err, "reading the boundary ConfigMap for an Event", "reason", reason)
		return
	}
	r.Recorder.Eventf(about, nil, kind, reason, "Resolve", "%s", msg)
}

func (r *Reconciler) period() time.Duration {
	if r.Period > 0 {
		return r.Period
	}
	return DefaultPeriod
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// SetupWithManager registers the controller (leader only): one key,
// enqueued by InstanceGroup creates, deletes and changes of spec or
// annotations (the OS family and architecture are annotations).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	one := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: r.RecordName}}
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("imagepins").
		Watches(&v1alpha1.InstanceGroup{}, one, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		Complete(r)
}
