// Package app wires the instance-manager manager: flags, scheme, cache,
// webhooks and controllers. main.go calls Run; tests and the demo call it
// with a rest.Config of their own.
package app

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"time"

	"fmt"
	"os"
	"strings"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/boundaries/store"
	"github.com/instancemgr/instance-manager/dryrun"
	awsp "github.com/instancemgr/instance-manager/providers/aws"
	"github.com/instancemgr/instance-manager/providers/aws/ownership"
	"github.com/instancemgr/instance-manager/providers/aws/refcheck"
	"github.com/instancemgr/instance-manager/providers/aws/resolve"
	"github.com/instancemgr/instance-manager/reconciler/autoscalerpriority"
	"github.com/instancemgr/instance-manager/reconciler/boundaryload"
	"github.com/instancemgr/instance-manager/reconciler/fanout"
	"github.com/instancemgr/instance-manager/reconciler/imagepins"
	"github.com/instancemgr/instance-manager/reconciler/rollout"
	"github.com/instancemgr/instance-manager/webhooks"
)

// ConfigMapName is the name of the boundary ConfigMap (BOUNDARIES.md).
const ConfigMapName = "instance-manager"

// RolloutRecordName is the ConfigMap, beside the boundary ConfigMap, in
// which the controller keeps the boundaries rollout: its state and the
// revisions groups may still run (boundaries/record).
const RolloutRecordName = ConfigMapName + "-rollout"

// Options are the command-line settings of the manager.
type Options struct {
	ConfigNamespace        string
	LeaderElect            bool
	LeaderElectionID       string
	MetricsBindAddress     string
	HealthProbeBindAddress string
	// PprofBindAddress serves Go's /debug/pprof profiles (CPU, heap,
	// goroutines) on plain HTTP; "0" or empty (the default) disables it.
	// Bind it to loopback and reach it with kubectl port-forward.
	PprofBindAddress string
	WebhookHost      string
	WebhookPort      int
	WebhookCertDir   string
	// WebhookHTTP2 serves the webhooks over HTTP/2 as well as HTTP/1.1.
	// With HTTP/1.1 the API server opens a new TLS connection for each
	// review beyond the ones it keeps idle (25 per webhook host), which
	// under a burst of creates costs both sides a TLS handshake per review;
	// with HTTP/2 every review shares one connection. Off by default: HTTP/2
	// stream handling was the target of denial-of-service attacks (rapid
	// reset, CVE-2023-44487), and the webhook Service is reachable from
	// any pod unless a NetworkPolicy restricts it.
	WebhookHTTP2 bool
	// WebhookAllowedSources are the API server's source addresses (CIDRs):
	// a request to the webhook port from elsewhere is refused unread
	// (webhooks.FrontDoor). Empty: any source, with a start-up warning.
	WebhookAllowedSources []string
	// WebhookRatePerSource bounds each source address's requests per
	// second to the webhook port (bursts of twice as many) when
	// WebhookAllowedSources is empty; <= 0: none.
	WebhookRatePerSource float64
	// WebhookRatePerUser and WebhookRatePerNamespace bound the admission
	// reviews per second, per webhook, of one user and of one namespace
	// (bursts of webhooks.AdmissionBurstFactor times as many;
	// webhooks.AdmissionLimits); <= 0: none.
	WebhookRatePerUser      float64
	WebhookRatePerNamespace float64
	// WebhookAWSRatePerRequester bounds the AWS reads per second that one
	// requester's admissions cause (cloud checks, image owners); <= 0: none.
	WebhookAWSRatePerRequester float64
	// ControllerUsername is the user the API server sees for this process:
	// only it may change the provenance annotations. Default: the pod's
	// service account, system:serviceaccount:$POD_NAMESPACE:$SERVICE_ACCOUNT_NAME.
	ControllerUsername string
	// CertRotation makes the manager create, rotate and inject its own
	// webhook serving certificate (see certs.go) instead of reading one
	// provided in WebhookCertDir (e.g. by cert-manager).
	CertRotation bool
	// WebhookServiceName and WebhookSecretName are the webhook Service and
	// the certificate Secret, both in $POD_NAMESPACE (with CertRotation).
	WebhookServiceName string
	WebhookSecretName  string
	// MutatingWebhookConfiguration and ValidatingWebhookConfiguration get
	// the CA in their caBundle (with CertRotation).
	MutatingWebhookConfiguration   string
	ValidatingWebhookConfiguration string

	// AWSRegion is the region of the clusters' AWS resources (default: the
	// AWS SDK's chain, e.g. AWS_REGION).
	AWSRegion string
	// AWS, when set, is used instead of loading the default AWS
	// configuration (tests and the demo point it at the emulator).
	AWS *awssdk.Config
	// MaxConcurrentUpgrades caps the InstanceGroups rotating nodes at once
	// (0: no cap); the boundary ConfigMap's rollout.maxConcurrentUpgrades
	// overrides it.
	MaxConcurrentUpgrades int
	// UpgradeStallTimeout is how long a group holding an upgrade slot may
	// make no rotation progress (no instance updated or terminated) before
	// its slot is released for other groups and its nodes left cordoned
	// are uncordoned; 0: never.
	UpgradeStallTimeout time.Duration
	// Workers is how many InstanceGroups are reconciled in parallel.
	Workers int
	// DrainTimeout is how long a node may take to drain before it is
	// reported blocked and skipped for now.
	DrainTimeout time.Duration
	// MaxConcurrentDrains caps the node drain steps running at once,
	// cluster-wide; MaxConcurrentDrainsPerGroup those of one InstanceGroup
	// (0: no cap other than the cluster-wide one). Drains run in the
	// background, never in a reconcile.
	MaxConcurrentDrains, MaxConcurrentDrainsPerGroup int
	// ImagePinPeriod is how often the image pin controller resolves the
	// groups' image references again (imagepins.DefaultPeriod when 0).
	ImagePinPeriod time.Duration
	// PollInterval and ResyncInterval: how often converging and Ready
	// groups are re-checked.
	PollInterval, ResyncInterval time.Duration
	// FailureBackoffMax caps the wait between retries of an InstanceGroup
	// whose reconcile keeps failing (1s, 2s, 4s … up to it; default 5m).
	FailureBackoffMax time.Duration
	// TransientErrorAttempts and TransientErrorGrace: a group whose
	// reconcile fails for a transient reason (providers.IsTransient) is
	// Degraded, keeping its last state, until the failure has lasted both
	// that many attempts and that long; then its state is Error (defaults
	// 5 and 5m).
	TransientErrorAttempts int
	TransientErrorGrace    time.Duration
	// CloudResyncPeriod is how long what a group read from AWS (IAM role,
	// policies and instance profile, launch template, access entry,
	// subnets, security groups) is trusted while its spec does not change
	// (default 1h); CloudPollPeriod how often each cluster's Auto Scaling
	// groups are listed, in one shared listing, to notice changes made
	// outside instance-manager (default 2m).
	CloudResyncPeriod, CloudPollPeriod time.Duration
	// InProcessRestarts allows a second manager in the same process after
	// the first stopped (tests that restart the controller): controller
	// names are otherwise required to be unique per process.
	InProcessRestarts bool
	// SpotRecommender is the Event source whose SpotRecommendationGiven
	// Events are honoured ("" ignores them all).
	SpotRecommender string
	// AllowNoBoundaries admits InstanceGroups as submitted while the
	// boundary ConfigMap does not exist (open mode). Off (the default),
	// tenants' creates and spec changes are refused until it exists.
	AllowNoBoundaries bool
	// LeastPrivilege pins the controller to its cluster and limits the
	// roles it creates (leastprivilege.go).
	LeastPrivilege
	// LeaderElectionNamespace is the namespace of the leader election
	// Lease. Empty: $POD_NAMESPACE, and when that is unset too,
	// controller-runtime's in-cluster default (the pod's namespace), which
	// does not exist out of cluster.
	LeaderElectionNamespace string
	// LeaseDuration is how long a replica waits, after the last renewal
	// it saw, before taking the leader election Lease from a leader that
	// stopped renewing (a killed leader is replaced within about
	// LeaseDuration+RetryPeriod); RenewDeadline is how long the leader
	// keeps retrying a renewal before it gives up leadership (and exits);
	// RetryPeriod is how often every replica tries to acquire or renew.
	// Zero: controller-runtime's defaults, 15s, 10s and 2s. They must
	// satisfy LeaseDuration > RenewDeadline > RetryPeriod.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration

	// GCPeriod, GCGrace, GCMaxDeletions and GCDryRun tune the garbage
	// collector of orphaned cloud resources (package reconciler/gc).
	GCPeriod, GCGrace time.Duration
	GCMaxDeletions    int
	GCDryRun          bool
	// CloudChecks makes the ConfigMap and InstanceGroup webhooks check the
	// cloud references they introduce (refcheck); the binary's flag
	// defaults to true.
	CloudChecks bool
	// AutoscalerPriorityConfigMap, "<namespace>/<name>", makes the
	// controller keep the cluster-autoscaler's priority expander ConfigMap
	// from the groups' priorities (package reconciler/autoscalerpriority);
	// empty: off.
	AutoscalerPriorityConfigMap string
	// DryRun records every mutating AWS and Kubernetes call (a log line
	// and a DryRun Event "would …") instead of making it; reads are real
	// (package dryrun). The webhooks still answer, and the manager's own
	// upkeep (leader election Lease, rotated webhook certificate) is real.
	DryRun bool
	// DryRunObserve, when set, also gets each call a dry run records
	// (tests).
	DryRunObserve func(call string)
	// InterruptionQueue is the URL of the SQS queue EventBridge feeds with
	// Auto Scaling lifecycle actions, spot interruption warnings,
	// rebalance recommendations and instance state changes (package
	// reconciler/interruption); empty: off.
	InterruptionQueue string
	// InstallationID identifies this installation in the ownership tag
	// instancemgr.keikoproj.io/installation. Default: the UID of the
	// kube-system Namespace.
	InstallationID string
}

// BindFlags registers the flags on fs.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.ConfigNamespace, "config-namespace", "instance-manager", "Namespace of the boundary ConfigMap \"instance-manager\".")
	fs.BoolVar(&o.LeaderElect, "leader-elect", false, "Elect a leader among replicas; only the leader reconciles (all replicas serve webhooks).")
	fs.StringVar(&o.LeaderElectionID, "leader-election-id", "instance-manager.instancemgr.keikoproj.io", "Name of the leader election Lease.")
	fs.StringVar(&o.MetricsBindAddress, "metrics-bind-address", ":8080", "Address of the Prometheus metrics endpoint (HTTPS; callers are authenticated with a TokenReview and authorized with a SubjectAccessReview for GET /metrics); \"0\" disables it.")
	fs.StringVar(&o.SpotRecommender, "spot-recommendation-source", "minion-manager", "Event source (source.component or reportingController) whose SpotRecommendationGiven Events are honoured; empty ignores them.")
	fs.BoolVar(&o.AllowNoBoundaries, "allow-no-boundaries", false, "Admit InstanceGroups as submitted while the boundary ConfigMap does not exist (open mode). Off: they are refused until the admin creates it.")
	fs.StringVar(&o.HealthProbeBindAddress, "health-probe-bind-address", ":8081", "Address of /healthz and /readyz; \"0\" disables them.")
	fs.StringVar(&o.PprofBindAddress, "pprof-bind-address", "0", "Address of Go's /debug/pprof profiles (plain HTTP, unauthenticated: bind to loopback, e.g. 127.0.0.1:6060, and use kubectl port-forward); \"0\" disables them.")
	fs.StringVar(&o.WebhookHost, "webhook-host", "", "Address the admission webhook server listens on (default: every interface).")
	fs.IntVar(&o.WebhookPort, "webhook-port", 9443, "Port of the admission webhook server (TLS).")
	fs.StringVar(&o.WebhookCertDir, "webhook-cert-dir", "/tmp/k8s-webhook-server/serving-certs", "Directory holding tls.crt and tls.key for the webhook server.")
	fs.BoolVar(&o.WebhookHTTP2, "webhook-http2", false, "Serve the admission webhooks over HTTP/2 as well as HTTP/1.1: the API server then sends every review over one connection instead of opening a TLS connection per review in a burst (off by default: HTTP/2 rapid-reset attacks, CVE-2023-44487; enable where a NetworkPolicy lets only the API server reach the webhook port).")
	fs.Func("webhook-allowed-sources", "The API server's source addresses (comma-separated CIDRs, e.g. the subnets of EKS's control-plane network interfaces): a request to the webhook port from any other address is refused unread. The chart passes networkPolicy.webhookFrom's ipBlocks. Empty: any source (the webhooks then trust whoever reaches the port).", func(v string) error {
		for _, c := range strings.Split(v, ",") {
			if c = strings.TrimSpace(c); c != "" {
				o.WebhookAllowedSources = append(o.WebhookAllowedSources, c)
			}
		}
		return nil
	})
	fs.Float64Var(&o.WebhookRatePerSource, "webhook-rate-per-source", webhooks.DefaultSourceRate, "Without --webhook-allowed-sources only: requests per second one source address may send to the webhook port (bursts of twice as many); more are refused with 429 before they are read. 0: no bound. (The API server's addresses are never bound: every user's admissions come from them; see --webhook-rate-per-user.)")
	fs.Float64Var(&o.WebhookRatePerUser, "webhook-rate-per-user", webhooks.DefaultUserRate, fmt.Sprintf("Admission reviews per second, per webhook, of one user (request.userInfo.username; bursts of %d times as many); more are refused with 429 TooManyRequests and a Retry-After. The controller and members of system:masters are never limited. 0: no bound.", webhooks.AdmissionBurstFactor))
	fs.Float64Var(&o.WebhookRatePerNamespace, "webhook-rate-per-namespace", webhooks.DefaultNamespaceRate, fmt.Sprintf("Admission reviews per second, per webhook, of the objects of one namespace, every user's together (bursts of %d times as many); more are refused with 429 TooManyRequests and a Retry-After. The controller and members of system:masters are never limited. 0: no bound.", webhooks.AdmissionBurstFactor))
	fs.Float64Var(&o.WebhookAWSRatePerRequester, "webhook-aws-rate-per-requester", webhooks.DefaultRequesterAWSRate, "AWS reads per second (bursts of 10 times as many) that one user's admissions may cause on a replica (cloud checks of new references, image owners; answers are cached); beyond it admission answers \"could not check, retry\". 0: no bound.")
	fs.StringVar(&o.ControllerUsername, "controller-username", "", "Username of this controller as the API server authenticates it (default: from POD_NAMESPACE and SERVICE_ACCOUNT_NAME).")
	fs.BoolVar(&o.CertRotation, "cert-rotation", false, "Create and rotate the webhook serving certificate in --webhook-secret-name and inject its CA into the webhook configurations (off: the certificate in --webhook-cert-dir is provided, e.g. by cert-manager).")
	fs.StringVar(&o.WebhookServiceName, "webhook-service-name", "instance-manager-webhook", "Name of the webhook Service in $POD_NAMESPACE; the rotated certificate is for <name>.<namespace>.svc.")
	fs.StringVar(&o.WebhookSecretName, "webhook-secret-name", "instance-manager-webhook-cert", "Name of the Secret in $POD_NAMESPACE holding the rotated webhook certificate; it must exist.")
	fs.StringVar(&o.MutatingWebhookConfiguration, "mutating-webhook-configuration", webhooks.MutatingConfigurationName, "MutatingWebhookConfiguration whose caBundle the certificate rotation fills.")
	fs.StringVar(&o.ValidatingWebhookConfiguration, "validating-webhook-configuration", webhooks.ValidatingConfigurationName, "ValidatingWebhookConfiguration whose caBundle the certificate rotation fills.")
	fs.StringVar(&o.AWSRegion, "aws-region", "", "AWS region of the clusters (default: from the AWS SDK chain, e.g. AWS_REGION).")
	fs.IntVar(&o.MaxConcurrentUpgrades, "max-concurrent-upgrades", 5, "InstanceGroups rotating nodes at once, cluster-wide (0: no cap); the boundary ConfigMap's rollout.maxConcurrentUpgrades overrides it. The slots are Leases instance-manager-upgrade-slot-<i> in the leader election namespace, so a restart keeps them.")
	fs.DurationVar(&o.UpgradeStallTimeout, "upgrade-stall-timeout", 30*time.Minute, "How long an InstanceGroup holding an upgrade slot may make no rotation progress (no instance updated or terminated) before its slot is released for other groups (Warning Event UpgradeStalled) and its nodes left cordoned are uncordoned; it asks for a slot again after as long. 0: never.")
	fs.IntVar(&o.Workers, "workers", 5, "InstanceGroups reconciled in parallel.")
	fs.DurationVar(&o.DrainTimeout, "drain-timeout", 10*time.Minute, "How long a node may take to drain (PodDisruptionBudgets) before it is reported blocked and skipped for now.")
	fs.IntVar(&o.MaxConcurrentDrains, "max-concurrent-drains", 20, "Node drain steps (evictions, at most 10s each) running at once, cluster-wide; drains still under way take turns. Drains run in the background: a reconcile never waits for one.")
	fs.IntVar(&o.MaxConcurrentDrainsPerGroup, "max-concurrent-drains-per-group", 5, "Node drain steps of one InstanceGroup running at once (0: only --max-concurrent-drains caps them).")
	fs.DurationVar(&o.ImagePinPeriod, "image-pin-period", imagepins.DefaultPeriod, "How often the AMI ids behind the groups' image references (image: latest, ssm://...) and the clusters' Kubernetes versions are resolved again (EKS DescribeCluster per cluster, SSM GetParameter per parameter in use). A changed value is pinned as a new boundaries revision and rolled out in the rollout policy's waves.")
	fs.DurationVar(&o.PollInterval, "poll-interval", 5*time.Second, "How often a converging or upgrading InstanceGroup is re-checked.")
	fs.DurationVar(&o.ResyncInterval, "resync-interval", 5*time.Minute, "How often a Ready InstanceGroup is re-checked (new AMIs, outside changes).")
	fs.DurationVar(&o.CloudResyncPeriod, "cloud-resync-period", time.Hour, "How long what a group read from AWS (its IAM role, policies and instance profile, launch template, access entry, subnets and security groups) is trusted while its spec does not change; a change made to those by hand is undone within it. A failing group reads them again after 5 minutes.")
	fs.DurationVar(&o.CloudPollPeriod, "cloud-poll-period", 2*time.Minute, "How often each cluster's Auto Scaling groups are listed (one shared, paginated listing per cluster) to notice changes made outside instance-manager: an instance terminated, sizes or the launch template changed, a group deleted.")
	fs.IntVar(&o.TransientErrorAttempts, "transient-error-attempts", 5, "Failed attempts after which a transient failure (throttling, AWS 5xx, eventual consistency, IAM propagation) of an InstanceGroup makes its state Error; before that, and before --transient-error-grace, it is Degraded and keeps its last state.")
	fs.DurationVar(&o.TransientErrorGrace, "transient-error-grace", 5*time.Minute, "How long a transient failure of an InstanceGroup must last (as well as --transient-error-attempts) before its state is Error.")
	fs.StringVar(&o.InterruptionQueue, "interruption-queue", "", "URL of an SQS queue fed by EventBridge rules (docs/autoscaling.md, \"Interruption queue\"): drains start within seconds of an Auto Scaling termination instead of at the next listing (--cloud-poll-period), and the nodes of spot instances EC2 is about to reclaim (2-minute warning) or that shut down are drained. Needs sqs:ReceiveMessage, sqs:DeleteMessage and sqs:GetQueueAttributes on the queue. Empty: off.")
	fs.DurationVar(&o.FailureBackoffMax, "failure-backoff-max", 5*time.Minute, "Longest wait between retries of an InstanceGroup whose reconcile keeps failing (the wait doubles from 1s; a spec change retries at once).")
	o.LeastPrivilege.bindFlags(fs)
	fs.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", "", "Namespace of the leader election Lease (default: $POD_NAMESPACE; needed out of cluster).")
	fs.DurationVar(&o.LeaseDuration, "leader-election-lease-duration", defaultLeaseDuration, "How long replicas wait after the leader's last renewal of the Lease before one takes over (a killed leader is replaced within about this plus the retry period).")
	fs.DurationVar(&o.RenewDeadline, "leader-election-renew-deadline", defaultRenewDeadline, "How long the leader retries renewing the Lease before it gives up leadership and exits; below the lease duration.")
	fs.DurationVar(&o.RetryPeriod, "leader-election-retry-period", defaultRetryPeriod, "How often replicas try to acquire or renew the Lease; below the renew deadline.")
	fs.DurationVar(&o.GCPeriod, "gc-period", 10*time.Minute, "How often the garbage collector sweeps for cloud resources whose InstanceGroup is gone or no longer uses them.")
	fs.DurationVar(&o.GCGrace, "gc-grace", 30*time.Minute, "How long a resource must stay orphaned before the garbage collector deletes it.")
	fs.IntVar(&o.GCMaxDeletions, "gc-max-deletions", 10, "Deletions per garbage collection sweep, at most.")
	fs.BoolVar(&o.GCDryRun, "gc-dry-run", false, "Only report orphaned cloud resources (log lines); delete nothing.")
	fs.BoolVar(&o.CloudChecks, "cloud-checks", true, "Refuse a boundary ConfigMap or InstanceGroup whose new cloud references (cluster, subnets, security groups, image, role, instance profile) do not exist or do not fit, at admission.")
	fs.StringVar(&o.AutoscalerPriorityConfigMap, "cluster-autoscaler-priority-configmap", "", "Keep this ConfigMap (<namespace>/<name>, e.g. kube-system/cluster-autoscaler-priority-expander) of the cluster-autoscaler's priority expander from the groups' instancemgr.keikoproj.io/cluster-autoscaler-priority annotations; empty: off.")
	fs.BoolVar(&o.DryRun, "dry-run", false, "Record every mutating AWS and Kubernetes call (log line and a DryRun Event \"would ...\") instead of making it; reads are real. Try the controller on a real account before switching it on.")
	fs.StringVar(&o.InstallationID, "installation-id", "", "Identity of this installation in the ownership tags (default: the UID of the kube-system Namespace).")
}

func (o *Options) controllerUsername() (string, error) {
	if o.ControllerUsername != "" {
		return o.ControllerUsername, nil
	}
	ns, sa := os.Getenv("POD_NAMESPACE"), os.Getenv("SERVICE_ACCOUNT_NAME")
	if ns == "" || sa == "" {
		return "", errors.New("--controller-username is required out of cluster (in cluster, set POD_NAMESPACE and SERVICE_ACCOUNT_NAME from the downward API)")
	}
	return "system:serviceaccount:" + ns + ":" + sa, nil
}

// Scheme returns the scheme with the Kubernetes and InstanceGroup types.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := v1alpha1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}

// Run builds the manager from cfg and opts and runs it until ctx ends.
// Errors: invalid options, or the manager failing to start or run.
func Run(ctx context.Context, cfg *rest.Config, opts Options) error {
	mgr, err := NewManager(cfg, opts)
	if err != nil {
		return err
	}
	return mgr.Start(ctx)
}

// NewManager builds the manager with every webhook and controller
// registered, without starting it.
func NewManager(cfg *rest.Config, opts Options) (ctrl.Manager, error) {
	username, err := opts.controllerUsername()
	if err != nil {
		return nil, err
	}
	if _, err := opts.roleLimits(); err != nil {
		return nil, err
	}
	if err := opts.checkLeaderElection(); err != nil {
		return nil, err
	}
	configMap := types.NamespacedName{Namespace: opts.ConfigNamespace, Name: ConfigMapName}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                        Scheme(),
		Metrics:                       MetricsOptions(opts.MetricsBindAddress),
		HealthProbeBindAddress:        opts.HealthProbeBindAddress,
		PprofBindAddress:              opts.PprofBindAddress,
		LeaderElection:                opts.LeaderElect,
		LeaderElectionID:              opts.LeaderElectionID,
		LeaderElectionNamespace:       orString(opts.LeaderElectionNamespace, os.Getenv("POD_NAMESPACE")),
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 nonZero(opts.LeaseDuration),
		RenewDeadline:                 nonZero(opts.RenewDeadline),
		RetryPeriod:                   nonZero(opts.RetryPeriod),
		Controller:                    ctrlconfig.Controller{SkipNameValidation: ptr.To(opts.InProcessRestarts)},
		WebhookServer: webhook.NewServer(webhook.Options{
			Host: opts.WebhookHost, Port: opts.WebhookPort, CertDir: opts.WebhookCertDir,
			TLSOpts: webhookTLSOpts(opts.WebhookHTTP2),
		}),
		Cache: cache.Options{
			// No cached object needs its managedFields (a large part of
			// each Node and InstanceGroup); updates keep the stored ones.
			DefaultTransform: cache.TransformStripManagedFields(),
			ByObject: map[client.Object]cache.ByObject{
				// Only the boundary ConfigMap and aws-auth are cached, not
				// every ConfigMap of the cluster.
				&corev1.ConfigMap{}: {Namespaces: map[string]cache.Config{
					opts.ConfigNamespace: {FieldSelector: fields.OneTermEqualSelector("metadata.name", ConfigMapName)},
					"kube-system":        {FieldSelector: fields.OneTermEqualSelector("metadata.name", "aws-auth")},
				}},
			}},
	})
	if err != nil {
		return nil, fmt.Errorf("creating the manager: %w", err)
	}
	if err := setInstallation(mgr.GetAPIReader(), opts.InstallationID); err != nil {
		return nil, err
	}
	st := &store.Store{}
	recorder := boundedNotes{mgr.GetEventRecorder("instance-manager")}
	if err := setupCertRotation(mgr, opts); err != nil {
		return nil, err
	}

	kube := mgr.GetClient()
	var dry *dryrun.Recorder
	if opts.DryRun {
		dry = &dryrun.Recorder{Events: recorder, Observe: opts.DryRunObserve}
		kube = dryrun.Client(kube, dry)
		opts.GCDryRun = true
	}
	clients, err := awsClients(opts, dry, awsp.ClusterGuard(opts.LeastPrivilege.clusterAllowed(st)))
	if err != nil {
		return nil, err
	}
	// The webhooks' AWS reads go through clients of their own, charged to
	// the requester (webhooks.AWSBudget); their lists come from the
	// manager's cache, never live from the API server.
	admissionAWS, err := awsClients(opts, dry, awsp.ClusterGuard(opts.LeastPrivilege.clusterAllowed(st)),
		webhooks.AWSBudget(opts.WebhookAWSRatePerRequester, int(10*opts.WebhookAWSRatePerRequester)))
	if err != nil {
		return nil, err
	}
	// Admission and the provisioners resolve subnets, security groups and
	// images through one cache: a reference either has read is not read
	// again by the other while fresh enough for it.
	references := &resolve.Cache{}
	var cloud webhooks.CloudChecker
	if opts.CloudChecks {
		cloud = &refcheck.Checker{AWS: admissionAWS, TTL: time.Minute, Refs: references}
	}
	door, err := webhooks.NewFrontDoor(opts.WebhookAllowedSources, opts.WebhookRatePerSource, int(2*opts.WebhookRatePerSource))
	if err != nil {
		return nil, err
	}
	if len(door.Sources) == 0 {
		ctrl.Log.WithName("setup").Info("WARNING: --webhook-allowed-sources is not set: the webhook port answers any source, and the webhooks trust the AdmissionReviews it sends; set it to the API server's addresses (chart value networkPolicy.webhookFrom)")
	}
	webhooks.Register(mgr.GetWebhookServer(), door, opts.admissionLimits(username),
		&webhooks.InstanceGroupMutator{Boundaries: st, AllowNoBoundaries: opts.AllowNoBoundaries, ControllerUser: username, ConfigMap: configMap, Recorder: recorder},
		&webhooks.InstanceGroupValidator{Boundaries: st, Reader: mgr.GetClient(), ConfigMap: configMap, Mapper: mgr.GetRESTMapper(),
			Allowlists: opts.LeastPrivilege.allowlists(opts, admissionAWS, references, st), Cloud: cloud,
			ControllerUser: username, Authority: webhooks.SubjectAccessReviews{Client: mgr.GetClient(), ConfigMap: configMap}},
		&webhooks.ConfigMapValidator{Client: mgr.GetClient(), ConfigMap: configMap, Cloud: cloud},
	)
	if err := setupBoundaryControllers(mgr, kube, opts, st, recorder, configMap, clients); err != nil {
		return nil, err
	}
	if err := setupAutoscalerPriority(mgr, kube, opts); err != nil {
		return nil, err
	}
	if err := setupInstanceGroups(mgr, kube, opts, st, recorder, clients, references, dry); err != nil {
		return nil, err
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("webhook", mgr.GetWebhookServer().StartedChecker()); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("boundaries", boundariesLoaded(st, configMap)); err != nil {
		return nil, err
	}
	return mgr, nil
}

// setupBoundaryControllers registers the controllers that carry a
// boundary change to the groups: the ConfigMap loader (every replica), the
// progressive rollout and the image pin controller (only when the rollout
// record may be kept, see recordCache) and the fan-out.
func setupBoundaryControllers(mgr ctrl.Manager, kube client.Client, opts Options, st *store.Store, recorder events.EventRecorder, configMap types.NamespacedName,
	clients *awsp.Clients) error {
	recordName := types.NamespacedName{Namespace: opts.ConfigNamespace, Name: RolloutRecordName}
	records, err := recordCache(mgr, recordName)
	if err != nil {
		return err
	}
	if records == nil {
		// Not allowed to keep the rollout record (an image newer than the
		// chart's RBAC): boundary changes reach every group at once.
		ctrl.Log.WithName("setup").Info("WARNING: the controller may not read and write ConfigMap " + recordName.String() +
			" (chart RBAC older than the image?): progressive rollouts are off, boundary changes reach every group at once")
	}
	if err := (&boundaryload.Reconciler{
		Client: kube, Store: st, ConfigMap: configMap, Recorder: recorder, Elected: mgr.Elected(),
		Record: records, RecordName: recordName,
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the boundaries controller: %w", err)
	}
	if records != nil {
		if err := (&rollout.Reconciler{
			Client: kube, Record: records, RecordName: recordName, ConfigMap: configMap, Store: st, Recorder: recorder,
			Pods: mgr.GetAPIReader(),
		}).SetupWithManager(mgr); err != nil {
			return fmt.Errorf("setting up the rollout controller: %w", err)
		}
		if err := (&imagepins.Reconciler{
			Client: kube, Record: records, RecordName: recordName, ConfigMap: configMap, Store: st, Recorder: recorder,
			EKS: clients.EKS, SSM: clients.SSM, Period: opts.ImagePinPeriod,
		}).SetupWithManager(mgr); err != nil {
			return fmt.Errorf("setting up the image pin controller: %w", err)
		}
	}
	if err := (&fanout.Reconciler{Client: kube, Store: st, Recorder: recorder, AllowNoBoundaries: opts.AllowNoBoundaries}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the fan-out controller: %w", err)
	}
	return nil
}

// setupAutoscalerPriority registers the cluster-autoscaler priority
// expander controller when --cluster-autoscaler-priority-configmap is set.
func setupAutoscalerPriority(mgr ctrl.Manager, kube client.Client, opts Options) error {
	cm := opts.AutoscalerPriorityConfigMap
	if cm == "" {
		return nil
	}
	ns, name, ok := strings.Cut(cm, "/")
	if !ok || ns == "" || name == "" {
		return fmt.Errorf("--cluster-autoscaler-priority-configmap %q: want <namespace>/<name>, e.g. kube-system/cluster-autoscaler-priority-expander", cm)
	}
	if err := (&autoscalerpriority.Reconciler{Client: kube, Reader: mgr.GetAPIReader(),
		ConfigMap: types.NamespacedName{Namespace: ns, Name: name}}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the cluster-autoscaler priority controller: %w", err)
	}
	return nil
}

// recordCache is a cache of the one rollout record ConfigMap, on every
// replica (their webhooks admit groups against the revisions it keeps).
// It is a cache of its own because the manager's caches the boundary
// ConfigMap by name in the same namespace, and RBAC grants reading these
// two ConfigMaps by name only.
//
// It returns nil when RBAC does not let the controller watch and update
// the record (SelfSubjectAccessReview): a watch it may not list would
// never sync.
func recordCache(mgr ctrl.Manager, name types.NamespacedName) (cache.Cache, error) {
	denied, err := deniedVerbs(context.Background(), mgr.GetClient(),
		authorizationv1.ResourceAttributes{Namespace: name.Namespace, Resource: "configmaps", Name: name.Name}, "watch", "update")
	if err != nil || len(denied) > 0 {
		return nil, err
	}
	c, err := cache.New(mgr.GetConfig(), cache.Options{
		Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
		ByObject: map[client.Object]cache.ByObject{&corev1.ConfigMap{}: {Namespaces: map[string]cache.Config{
			name.Namespace: {FieldSelector: fields.OneTermEqualSelector("metadata.name", name.Name)},
		}}},
	})
	if err != nil {
		return nil, fmt.Errorf("creating the cache of the rollout record %s: %w", name, err)
	}
	// Started and synced with the manager's caches, before the
	// controllers and webhooks that read it.
	if err := mgr.Add(cacheRunnable{c}); err != nil {
		return nil, err
	}
	return c, nil
}

// cacheRunnable makes the manager start a cache with its own caches.
type cacheRunnable struct{ cache.Cache }

func (c cacheRunnable) GetCache() cache.Cache { return c.Cache }

// setInstallation sets the installation id of the ownership tags: id, or
// the UID of the kube-system Namespace (stable for the cluster's life).
func setInstallation(r client.Reader, id string) error {
	if id != "" {
		// Two releases given one id (one values file for blue/green
		// clusters) would each take the other's resources for its own;
		// the garbage collector judges only its clusters' (--cluster-name).
		ctrl.Log.WithName("setup").Info("WARNING: --installation-id is set: it must differ between installations that share an AWS account and region " +
			"(the default, the kube-system Namespace's UID, always does); resources of clusters other than --cluster-name/--additional-cluster-names are never collected")
	}
	if id == "" {
		ns := &corev1.Namespace{}
		if err := r.Get(context.Background(), types.NamespacedName{Name: "kube-system"}, ns); err != nil {
			return fmt.Errorf("reading Namespace kube-system for the installation id (or set --installation-id): %w", err)
		}
		id = string(ns.UID)
	}
	ownership.SetInstallation(id)
	return nil
}

// MetricsOptions serves the metrics at addr ("0": off) over HTTPS with a
// self-signed certificate, HTTP/1.1 only, and only to callers the API
// server authenticates (TokenReview) and authorizes for GET /metrics
// (SubjectAccessReview; the chart's metrics-reader ClusterRole grants it).
func MetricsOptions(addr string) metricsserver.Options {
	return metricsserver.Options{
		BindAddress:    addr,
		SecureServing:  true,
		FilterProvider: filters.WithAuthenticationAndAuthorization,
		TLSOpts:        []func(*tls.Config){http1Only},
	}
}

// http1Only turns HTTP/2 off on a TLS server: its stream handling has
// been the target of denial-of-service attacks (HTTP/2 rapid reset).
func http1Only(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }

// webhookTLSOpts are the webhook server's TLS options: HTTP/1.1 only
// unless http2.
func webhookTLSOpts(http2 bool) []func(*tls.Config) {
	if http2 {
		return nil
	}
	return []func(*tls.Config){http1Only}
}

// orString returns s, or def when s is empty.
func orString(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// admissionLimits are the per-user and per-namespace admission bounds of
// the flags; the controller (controllerUser) is never limited.
func (o Options) admissionLimits(controllerUser string) webhooks.AdmissionLimits {
	return webhooks.AdmissionLimits{
		UserRate: o.WebhookRatePerUser, UserBurst: int(webhooks.AdmissionBurstFactor * o.WebhookRatePerUser),
		NamespaceRate: o.WebhookRatePerNamespace, NamespaceBurst: int(webhooks.AdmissionBurstFactor * o.WebhookRatePerNamespace),
		ExemptUsers: []string{controllerUser},
	}
}
