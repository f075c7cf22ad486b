package v1alpha1

// EnumField is a spec field with a fixed set of values, by its path from
// spec ("[]" steps into every element of a list; a path ending in "[]" is a
// list of such values), with the canonical spelling of each value.
//
// The CRD declares no enum for these fields: manifests written for
// keikoproj instance-manager spell them in any case and with or without
// '-' or '_' (lifecycle: Launch, defaultResult: CONTINUE, strategy.type:
// rollingupdate, strategy: capacity-optimized). Admission turns each into
// the canonical spelling (boundaries.NormalizeSpellings) and the validating
// webhook accepts only that.
//
// +kubebuilder:object:generate=false
type EnumField struct {
	Path   string
	Values []string
}

// AutoScalingMetrics are the values Auto Scaling EnableMetricsCollection
// accepts (spec.eks.configuration.metricsCollection), sorted.
var AutoScalingMetrics = []string{
	"All", "GroupAndWarmPoolDesiredCapacity", "GroupAndWarmPoolTotalCapacity", "GroupDesiredCapacity",
	"GroupInServiceCapacity", "GroupInServiceInstances", "GroupMaxSize", "GroupMinSize",
	"GroupPendingCapacity", "GroupPendingInstances", "GroupStandbyCapacity", "GroupStandbyInstances",
	"GroupTerminatingCapacity", "GroupTerminatingInstances", "GroupTotalCapacity", "GroupTotalInstances",
	"WarmPoolDesiredCapacity", "WarmPoolPendingCapacity", "WarmPoolTerminatingCapacity", "WarmPoolTotalCapacity",
	"WarmPoolWarmedCapacity",
}

// AutoScalingProcesses are the values Auto Scaling SuspendProcesses
// accepts (spec.eks.configuration.suspendProcesses), sorted.
var AutoScalingProcesses = []string{
	"AZRebalance", "AddToLoadBalancer", "AlarmNotification", "All", "HealthCheck",
	"InstanceRefresh", "Launch", "ReplaceUnhealthy", "ScheduledActions", "Terminate",
}

// EnumFields lists every enumerated spec field with its canonical spellings.
var EnumFields = []EnumField{
	{"provisioner", []string{ProvisionerEKS, ProvisionerEKSManaged, ProvisionerEKSFargate, ProvisionerEKSCF}},
	{"strategy.type", []string{StrategyRollingUpdate, StrategyCRD, StrategyManaged}},
	{"strategy.crd.concurrencyPolicy", []string{ConcurrencyForbid, ConcurrencyReplace, ConcurrencyAllow}},
	{"eks.type", []string{LaunchTemplate, LaunchConfiguration}},
	{"eks.configuration.volumes[].type", []string{"gp2", "gp3", "io1", "io2", "st1", "sc1", "standard"}},
	{"eks.configuration.volumes[].mountOptions.fileSystem", []string{"xfs", "ext4"}},
	{"eks.configuration.userData[].stage", []string{"PreBootstrap", "PostBootstrap"}},
	{"eks.configuration.mixedInstancesPolicy.strategy", []string{"CapacityOptimized", "LowestPrice", "PriceCapacityOptimized"}},
	{"eks.configuration.mixedInstancesPolicy.instancePool", []string{InstancePoolSubFamilyFlexible}},
	{"eks.configuration.lifecycleHooks[].lifecycle", []string{"launch", "terminate"}},
	{"eks.configuration.lifecycleHooks[].defaultResult", []string{"abandon", "continue"}},
	{"eks.configuration.metadataOptions.httpEndpoint", []string{"enabled", "disabled"}},
	{"eks.configuration.metadataOptions.httpTokens", []string{"required", "optional"}},
	{"eks.configuration.placement.tenancy", []string{"default", "dedicated", "host"}},
	{"eks.configuration.metricsCollection[]", AutoScalingMetrics},
	{"eks.configuration.suspendProcesses[]", AutoScalingProcesses},
	{"eks-managed.configuration.capacityType", []string{"ON_DEMAND", "SPOT"}},
}
