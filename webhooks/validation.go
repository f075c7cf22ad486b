package webhooks

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/template"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	awsp "github.com/instancemgr/instance-manager/providers/aws"
	"github.com/instancemgr/instance-manager/providers/eks"
)

var (
	amiID      = regexp.MustCompile(`^ami-[0-9a-zA-Z]+$`)
	spotPrice  = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?$`)
	subnetLike = regexp.MustCompile(`^\S+$`)

	osFamilies = set(v1alpha1.OSFamilyAmazonLinux2, v1alpha1.OSFamilyAmazonLinux2023,
		v1alpha1.OSFamilyBottlerocket, v1alpha1.OSFamilyWindows)
	architectures = set("x86_64", "arm64")
)

func set(values ...string) map[string]bool {
	m := make(map[string]bool, len(values))
	for _, v := range values {
		m[v] = true
	}
	return m
}

// ValidateInstanceGroup checks that an effective InstanceGroup can be built:
// required fields for its provisioner, sizes, strategy/provisioner pairs,
// maxUnavailable, label, taint and tag shapes, and the values AWS accepts.
// It returns every problem with its field path (empty when valid) and
// warnings for accepted but deprecated input.
func ValidateInstanceGroup(ig *v1alpha1.InstanceGroup) (field.ErrorList, []string) {
	var errs field.ErrorList
	var warnings []string
	spec := field.NewPath("spec")
	errs = append(errs, validateAnnotations(ig.Annotations)...)

	provisioner := ig.Spec.Provisioner
	switch provisioner {
	case "":
		errs = append(errs, field.Required(spec.Child("provisioner"),
			"set it in the InstanceGroup or in the boundary ConfigMap's defaults (one of eks, eks-managed, eks-fargate)"))
		if ig.Spec.EKS != nil {
			// The likely intent; say everything else it lacks too.
			errs = append(errs, validateEKS(ig.Spec.EKS, spec.Child("eks"))...)
		}
	case v1alpha1.ProvisionerEKSCF:
		warnings = append(warnings, `spec.provisioner: "eks-cf" is deprecated and is built by the "eks" provisioner from spec.eks; set provisioner: eks`)
		errs = append(errs, validateEKS(ig.Spec.EKS, spec.Child("eks"))...)
	case v1alpha1.ProvisionerEKS:
		errs = append(errs, validateEKS(ig.Spec.EKS, spec.Child("eks"))...)
	case v1alpha1.ProvisionerEKSManaged:
		errs = append(errs, validateEKSManaged(ig.Spec.EKSManaged, spec.Child("eks-managed"))...)
	case v1alpha1.ProvisionerEKSFargate:
		errs = append(errs, validateEKSFargate(ig.Spec.EKSFargate, spec.Child("eks-fargate"))...)
	default:
		errs = append(errs, field.NotSupported(spec.Child("provisioner"), provisioner,
			[]string{v1alpha1.ProvisionerEKS, v1alpha1.ProvisionerEKSManaged, v1alpha1.ProvisionerEKSFargate}))
	}
	errs = append(errs, validateStrategy(provisioner, &ig.Spec.Strategy, spec.Child("strategy"))...)
	errs = append(errs, validateReservedTags(&ig.Spec, spec)...)
	switch provisioner {
	case "", v1alpha1.ProvisionerEKS, v1alpha1.ProvisionerEKSCF, v1alpha1.ProvisionerEKSManaged:
		errs = append(errs, validateNodeLabelName(ig)...)
	}
	if (provisioner == v1alpha1.ProvisionerEKS || provisioner == v1alpha1.ProvisionerEKSCF) && ig.Spec.EKS != nil && ig.Spec.EKS.Configuration != nil {
		errs = append(errs, validateEKSLimits(ig, spec.Child("eks", "configuration"))...)
	}
	if ig.Spec.EKS != nil && ig.Spec.EKS.WarmPool != nil && ig.Annotations[v1alpha1.AnnotationOSFamily] == v1alpha1.OSFamilyWindows {
		errs = append(errs, field.Forbidden(spec.Child("eks", "warmPool"), eks.WarmPoolWindowsRefusal))
	}
	return errs, warnings
}

// validateNodeLabelName refuses a name that cannot be the value of the
// label instancemgr.keikoproj.io/instancegroup, which every node of the
// group carries: the kubelet of such a node would not start.
func validateNodeLabelName(ig *v1alpha1.InstanceGroup) field.ErrorList {
	if n := len(ig.Name); n > validation.LabelValueMaxLength {
		return field.ErrorList{field.Invalid(field.NewPath("metadata", "name"), ig.Name, fmt.Sprintf(
			"is %d characters; at most %d are allowed: the name is the value of the node label %s, and Kubernetes label values hold %d characters",
			n, validation.LabelValueMaxLength, v1alpha1.LabelInstanceGroup, validation.LabelValueMaxLength))}
	}
	return nil
}

// validateEKSLimits refuses an eks spec that AWS would refuse: user data
// over EC2's 16 KB, more tags than an Auto Scaling group holds.
func validateEKSLimits(ig *v1alpha1.InstanceGroup, cp *field.Path) field.ErrorList {
	var errs field.ErrorList
	if size := eks.UserDataSize(ig); size > eks.MaxUserDataBytes {
		errs = append(errs, field.Invalid(cp.Child("userData"), fmt.Sprintf("<%d bytes>", size), fmt.Sprintf(
			"the nodes' user data would be %d bytes (the bootstrap with its labels, taints and arguments, and the userData stages); "+
				"EC2 allows %d bytes: shorten the userData stages, labels or taints by at least %d bytes", size, eks.MaxUserDataBytes, size-eks.MaxUserDataBytes)))
	}
	if total, added := eks.ScalingGroupTags(ig); total > eks.MaxScalingGroupTags {
		errs = append(errs, field.Invalid(cp.Child("tags"), fmt.Sprintf("<%d tags>", total-added), fmt.Sprintf(
			"with the %d that instance-manager sets (Name, cluster, ownership, the record of managed tags) the Auto Scaling group would have %d tags; "+
				"AWS allows %d: at most %d tags here, remove at least %d", added, total, eks.MaxScalingGroupTags,
			eks.MaxScalingGroupTags-added, total-eks.MaxScalingGroupTags)))
	}
	return errs
}

func validateAnnotations(a map[string]string) field.ErrorList {
	var errs field.ErrorList
	path := field.NewPath("metadata", "annotations")
	if v, ok := a[v1alpha1.AnnotationOSFamily]; ok && !osFamilies[v] {
		errs = append(errs, field.NotSupported(path.Key(v1alpha1.AnnotationOSFamily), v, slices.Sorted(maps.Keys(osFamilies))))
	}
	if v, ok := a[v1alpha1.AnnotationClusterAutoscalerPriority]; ok {
		if n, err := strconv.Atoi(v); err != nil || n < 0 {
			errs = append(errs, field.Invalid(path.Key(v1alpha1.AnnotationClusterAutoscalerPriority), v, "must be a non-negative integer (the higher, the sooner the cluster-autoscaler's priority expander scales the group up)"))
		}
	}
	if v, ok := a[v1alpha1.AnnotationArchitecture]; ok && !architectures[v] {
		errs = append(errs, field.NotSupported(path.Key(v1alpha1.AnnotationArchitecture), v, slices.Sorted(maps.Keys(architectures))))
	}
	return errs
}

func validateSizes(min, max int64, path *field.Path) field.ErrorList {
	if min > max {
		return field.ErrorList{field.Invalid(path.Child("minSize"), min,
			fmt.Sprintf("must not be greater than maxSize (%d)", max))}
	}
	return nil
}

func validateEKS(eks *v1alpha1.EKSSpec, path *field.Path) field.ErrorList {
	if eks == nil {
		return field.ErrorList{field.Required(path, "the eks provisioner needs spec.eks with minSize, maxSize and configuration")}
	}
	errs := validateSizes(eks.MinSize, eks.MaxSize, path)
	if eks.WarmPool != nil {
		wp := path.Child("warmPool")
		if eks.WarmPool.MaxSize != -1 && eks.WarmPool.MaxSize < eks.WarmPool.MinSize {
			errs = append(errs, field.Invalid(wp.Child("maxSize"), eks.WarmPool.MaxSize, "must be -1 (the group's maxSize) or at least warmPool.minSize"))
		}
	}
	errs = append(errs, validateNodeHealth(eks.NodeHealth, path.Child("nodeHealth"))...)
	c := eks.Configuration
	cp := path.Child("configuration")
	if c == nil {
		return append(errs, field.Required(cp, "needs clusterName, image, instanceType, subnets and securityGroups"))
	}
	errs = append(errs, requiredString(c.ClusterName, cp.Child("clusterName"))...)
	errs = append(errs, requiredString(c.InstanceType, cp.Child("instanceType"))...)
	switch {
	case c.Image == "":
		errs = append(errs, field.Required(cp.Child("image"), "an AMI id (ami-...), latest, or ssm://<parameter>"))
	case c.Image == "latest", strings.HasPrefix(c.Image, "ssm://") && len(c.Image) > len("ssm://"), amiID.MatchString(c.Image):
	default:
		errs = append(errs, field.Invalid(cp.Child("image"), c.Image, "must be an AMI id (ami-...), latest, or ssm://<parameter>"))
	}
	errs = append(errs, requiredList(c.Subnets, cp.Child("subnets"), "subnet ids or Name tag values")...)
	errs = append(errs, requiredList(c.SecurityGroups, cp.Child("securityGroups"), "security group ids or Name tag values")...)
	errs = append(errs, validateLabels(c.Labels, cp.Child("labels"))...)
	errs = append(errs, validateNodeLabels(c.Labels, cp.Child("labels"))...)
	errs = append(errs, validateTaints(c.Taints, cp.Child("taints"))...)
	errs = append(errs, validateTags(c.Tags, cp.Child("tags"))...)
	errs = append(errs, validateTagSpecifications(c.TagSpecifications, cp.Child("tagSpecifications"))...)
	errs = append(errs, validateVolumes(c.Volumes, cp.Child("volumes"))...)
	errs = append(errs, validateNodeStrings(c, cp)...)
	if c.SpotPrice != "" {
		if p, err := strconv.ParseFloat(c.SpotPrice, 64); err != nil || p <= 0 || !spotPrice.MatchString(c.SpotPrice) {
			errs = append(errs, field.Invalid(cp.Child("spotPrice"), c.SpotPrice, `must be a positive decimal hourly price in USD, e.g. "0.67"`))
		}
		if eks.WarmPool != nil {
			// Amazon EC2 Auto Scaling User Guide, "Warm pools": a group
			// that launches Spot Instances cannot have one; admitted, the
			// Auto Scaling group would be built and PutWarmPool refused.
			errs = append(errs, field.Forbidden(path.Child("warmPool"), "Auto Scaling does not support a warm pool for a group that launches Spot Instances (spotPrice); remove warmPool or spotPrice"))
		}
	}
	if (c.RoleName == "") != (c.InstanceProfileName == "") {
		errs = append(errs, field.Invalid(cp.Child("instanceProfileName"), c.InstanceProfileName,
			"roleName and instanceProfileName go together: set both to bring your own role, or neither to let the controller create one"))
	}
	if c.MixedInstancesPolicy != nil {
		errs = append(errs, validateMixedInstances(c, eks.WarmPool != nil, path)...)
	}
	errs = append(errs, validateLifecycleHooks(c.LifecycleHooks, cp.Child("lifecycleHooks"))...)
	errs = append(errs, validateScalingGroupEnums(c, cp)...)
	return append(errs, validateUserData(c.UserData, cp.Child("userData"))...)
}

// validateNodeHealth checks spec.eks.nodeHealth (at path): durations not
// negative, maxReplacing a count or a percentage.
func validateNodeHealth(h *v1alpha1.NodeHealthSpec, path *field.Path) field.ErrorList {
	if h == nil {
		return nil
	}
	var errs field.ErrorList
	for _, d := range []struct {
		name string
		d    *metav1.Duration
	}{{"startupTimeout", h.StartupTimeout}, {"unhealthyTimeout", h.UnhealthyTimeout}} {
		if d.d != nil && d.d.Duration < 0 {
			errs = append(errs, field.Invalid(path.Child(d.name), d.d.Duration.String(), "must be a positive duration such as \"10m\" (0 or absent: the default)"))
		}
	}
	if h.MaxReplacing != nil {
		errs = append(errs, validatePercent(h.MaxReplacing, path.Child("maxReplacing"), 0)...)
	}
	return errs
}

// validateMixedInstances checks c.MixedInstancesPolicy (set) of the eks
// section at path, which has a warm pool when warmPool is true: what Auto
// Scaling refuses to combine it with, instancePool against instanceTypes,
// and the instance types' weights (all or none, each in Auto Scaling's
// range).
func validateMixedInstances(c *v1alpha1.EKSConfiguration, warmPool bool, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	m := c.MixedInstancesPolicy
	cp := path.Child("configuration")
	mp := cp.Child("mixedInstancesPolicy")
	if c.SpotPrice != "" {
		errs = append(errs, field.Forbidden(mp, "cannot be combined with spotPrice; use spotRatio"))
	}
	if warmPool {
		errs = append(errs, field.Forbidden(path.Child("warmPool"), "Auto Scaling does not support a warm pool with a mixed instances policy"))
	}
	if (m.InstancePool == "") == (len(m.InstanceTypes) == 0) {
		errs = append(errs, field.Invalid(mp, "", "set exactly one of instancePool and instanceTypes"))
	}
	if m.SpotPools != nil && m.Strategy != "LowestPrice" {
		errs = append(errs, field.Forbidden(mp.Child("spotPools"), "only with strategy LowestPrice"))
	}
	if m.SpotRatio != nil {
		errs = append(errs, validatePercent(m.SpotRatio, mp.Child("spotRatio"), 0)...)
	}
	seen := map[string]bool{}
	for i, t := range m.InstanceTypes {
		if seen[t.Type] {
			errs = append(errs, field.Duplicate(mp.Child("instanceTypes").Index(i).Child("type"), t.Type))
		}
		seen[t.Type] = true
		if t.Weight > v1alpha1.MaxInstanceWeight {
			errs = append(errs, field.Invalid(mp.Child("instanceTypes").Index(i).Child("weight"), t.Weight,
				fmt.Sprintf("must be 1 to %d (Auto Scaling's range)", v1alpha1.MaxInstanceWeight)))
		}
	}
	if i, partial := m.PartialWeight(); partial {
		weighted := 0
		for j, t := range m.InstanceTypes {
			if t.Weight > 0 {
				weighted = j
				break
			}
		}
		errs = append(errs, field.Required(mp.Child("instanceTypes").Index(i).Child("weight"),
			fmt.Sprintf("weights are all or none: instanceTypes[%d] (%s) has weight %d, so every instance type needs one (Auto Scaling refuses partial weights; with weights, minSize, maxSize and the desired capacity are capacity units)",
				weighted, m.InstanceTypes[weighted].Type, m.InstanceTypes[weighted].Weight)))
	}
	if m.InstancePool == v1alpha1.InstancePoolSubFamilyFlexible && c.InstanceType != "" {
		if _, _, ok := v1alpha1.SubFamilyOf(c.InstanceType); !ok {
			errs = append(errs, field.Invalid(cp.Child("instanceType"), c.InstanceType,
				"instancePool SubFamilyFlexible derives instance types from the family and generation of instanceType (m5 in m5.xlarge); this type has none, so list mixedInstancesPolicy.instanceTypes instead"))
		}
	}
	return errs
}

// validateLifecycleHooks checks the eks lifecycle hooks (at path): names
// unique and not instance-manager's own, a lifecycle, and a notification
// target with its role.
func validateLifecycleHooks(hooks []v1alpha1.LifecycleHookSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	for i, h := range hooks {
		hp := path.Index(i)
		if seen[h.Name] {
			errs = append(errs, field.Duplicate(hp.Child("name"), h.Name))
		}
		seen[h.Name] = true
		if h.Name == awsp.DrainHookName {
			errs = append(errs, field.Invalid(hp.Child("name"), h.Name,
				"reserved: instance-manager puts its own termination hook of this name on every group, to drain nodes before Auto Scaling terminates their instances"))
		}
		if h.Lifecycle == "" {
			errs = append(errs, field.Required(hp.Child("lifecycle"), "launch or terminate"))
		}
		if (h.NotificationArn == "") != (h.RoleArn == "") {
			errs = append(errs, field.Invalid(hp.Child("roleArn"), h.RoleArn, "notificationArn and roleArn go together"))
		}
	}
	return errs
}

// validateScalingGroupEnums checks the Auto Scaling metrics and processes
// of the eks configuration c (at cp) against the values Auto Scaling
// accepts (v1alpha1.AutoScalingMetrics, v1alpha1.AutoScalingProcesses).
func validateScalingGroupEnums(c *v1alpha1.EKSConfiguration, cp *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, m := range c.MetricsCollection {
		if !slices.Contains(v1alpha1.AutoScalingMetrics, m) {
			errs = append(errs, field.NotSupported(cp.Child("metricsCollection").Index(i), m, v1alpha1.AutoScalingMetrics))
		}
	}
	for i, p := range c.SuspendProcesses {
		if !slices.Contains(v1alpha1.AutoScalingProcesses, p) {
			errs = append(errs, field.NotSupported(cp.Child("suspendProcesses").Index(i), p, v1alpha1.AutoScalingProcesses))
		}
	}
	return errs
}

// validateUserData checks the eks userData stages (at path): names
// unique, a stage and data each.
func validateUserData(stages []v1alpha1.UserDataStage, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	for i, u := range stages {
		up := path.Index(i)
		if u.Name != "" && seen[u.Name] {
			errs = append(errs, field.Duplicate(up.Child("name"), u.Name))
		}
		seen[u.Name] = true
		if u.Stage == "" {
			errs = append(errs, field.Required(up.Child("stage"), "PreBootstrap or PostBootstrap"))
		}
		if u.Data == "" {
			errs = append(errs, field.Required(up.Child("data"), "the script, plain text or base64"))
		}
	}
	return errs
}

func validateEKSManaged(m *v1alpha1.EKSManagedSpec, path *field.Path) field.ErrorList {
	if m == nil {
		return field.ErrorList{field.Required(path, "the eks-managed provisioner needs spec.eks-managed with minSize, maxSize and configuration")}
	}
	errs := validateSizes(m.MinSize, m.MaxSize, path)
	if m.MaxSize < 1 {
		errs = append(errs, field.Invalid(path.Child("maxSize"), m.MaxSize, "EKS managed node groups need maxSize of at least 1"))
	}
	c := m.Configuration
	cp := path.Child("configuration")
	if c == nil {
		return append(errs, field.Required(cp, "needs clusterName and subnets"))
	}
	errs = append(errs, requiredString(c.ClusterName, cp.Child("clusterName"))...)
	errs = append(errs, requiredList(c.Subnets, cp.Child("subnets"), "subnet ids or Name tag values")...)
	errs = append(errs, validateLabels(c.Labels, cp.Child("labels"))...)
	errs = append(errs, validateLabels(c.NodeLabels, cp.Child("nodeLabels"))...)
	errs = append(errs, validateNodeLabels(c.Labels, cp.Child("labels"))...)
	errs = append(errs, validateNodeLabels(c.NodeLabels, cp.Child("nodeLabels"))...)
	errs = append(errs, validateTaints(c.Taints, cp.Child("taints"))...)
	errs = append(errs, validateTags(c.Tags, cp.Child("tags"))...)
	if c.InstanceType != "" && len(c.InstanceTypes) > 0 {
		errs = append(errs, field.Invalid(cp.Child("instanceTypes"), c.InstanceTypes, "set instanceType or instanceTypes, not both"))
	}
	if len(c.SecurityGroups) > 0 && c.KeyPairName == "" {
		errs = append(errs, field.Required(cp.Child("keyPairName"), "securityGroups are the sources allowed SSH remote access, which needs a key pair"))
	}
	if c.KeyPairName != "" && len(c.SecurityGroups) == 0 {
		// EKS opens port 22 to 0.0.0.0/0 for a key without sources.
		errs = append(errs, field.Required(cp.Child("securityGroups"), "SSH remote access with keyPairName needs the source security groups allowed to connect (EKS would open port 22 to the whole internet)"))
	}
	return errs
}

func validateEKSFargate(f *v1alpha1.EKSFargateSpec, path *field.Path) field.ErrorList {
	if f == nil {
		return field.ErrorList{field.Required(path, "the eks-fargate provisioner needs spec.eks-fargate with clusterName, subnets and selectors")}
	}
	errs := requiredString(f.ClusterName, path.Child("clusterName"))
	errs = append(errs, requiredList(f.Subnets, path.Child("subnets"), "private subnet ids")...)
	sp := path.Child("selectors")
	switch n := len(f.Selectors); {
	case n == 0:
		errs = append(errs, field.Required(sp, "1 to 5 selectors of namespace and labels"))
	case n > 5:
		errs = append(errs, field.TooMany(sp, n, 5))
	}
	for i, s := range f.Selectors {
		errs = append(errs, requiredString(s.Namespace, sp.Index(i).Child("namespace"))...)
		errs = append(errs, validateLabels(s.Labels, sp.Index(i).Child("labels"))...)
	}
	errs = append(errs, validateTagKeys(slices.Sorted(maps.Keys(f.Tags)), func(k string) *field.Path { return path.Child("tags").Key(k) })...)
	if f.PodExecutionRoleArn != "" && !strings.HasPrefix(f.PodExecutionRoleArn, "arn:") {
		errs = append(errs, field.Invalid(path.Child("podExecutionRoleArn"), f.PodExecutionRoleArn, "must be an IAM role ARN (arn:aws:iam::<account>:role/<name>)"))
	}
	return errs
}

func validateStrategy(provisioner string, s *v1alpha1.AwsUpgradeStrategy, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	tp := path.Child("type")
	managedOnly := provisioner == v1alpha1.ProvisionerEKSManaged || provisioner == v1alpha1.ProvisionerEKSFargate
	switch s.Type {
	case "":
		if managedOnly {
			return field.ErrorList{field.Required(tp, provisioner+" needs strategy type managed")}
		}
		return field.ErrorList{field.Required(tp, "one of rollingUpdate, crd (or managed for eks-managed and eks-fargate)")}
	case v1alpha1.StrategyManaged:
		if !managedOnly && provisioner != "" {
			errs = append(errs, field.Invalid(tp, s.Type, "managed is only for eks-managed and eks-fargate; the eks provisioner needs rollingUpdate or crd"))
		}
	case v1alpha1.StrategyRollingUpdate, v1alpha1.StrategyCRD:
		if managedOnly {
			errs = append(errs, field.Invalid(tp, s.Type, provisioner+" is rotated by AWS: strategy type must be managed"))
		}
	default:
		return field.ErrorList{field.NotSupported(tp, s.Type, []string{v1alpha1.StrategyRollingUpdate, v1alpha1.StrategyCRD, v1alpha1.StrategyManaged})}
	}
	if s.Type == v1alpha1.StrategyRollingUpdate && s.RollingUpdate != nil {
		rp := path.Child("rollingUpdate")
		if s.RollingUpdate.MaxUnavailable != nil {
			errs = append(errs, validatePercent(s.RollingUpdate.MaxUnavailable, rp.Child("maxUnavailable"), 1)...)
		}
		if s.RollingUpdate.MaxSurge != nil {
			errs = append(errs, validatePercent(s.RollingUpdate.MaxSurge, rp.Child("maxSurge"), 0)...)
		}
	}
	if s.Type == v1alpha1.StrategyCRD {
		cp := path.Child("crd")
		c := s.CRD
		if c == nil {
			return append(errs, field.Required(cp, "crdName, spec, statusJSONPath, statusSuccessString and statusFailureString"))
		}
		errs = append(errs, requiredString(c.CRDName, cp.Child("crdName"))...)
		errs = append(errs, requiredString(c.StatusJSONPath, cp.Child("statusJSONPath"))...)
		errs = append(errs, requiredString(c.StatusSuccessString, cp.Child("statusSuccessString"))...)
		errs = append(errs, requiredString(c.StatusFailureString, cp.Child("statusFailureString"))...)
		switch strings.ToLower(c.ConcurrencyPolicy) {
		case "", v1alpha1.ConcurrencyForbid, v1alpha1.ConcurrencyReplace, v1alpha1.ConcurrencyAllow:
		default:
			errs = append(errs, field.NotSupported(cp.Child("concurrencyPolicy"), c.ConcurrencyPolicy,
				[]string{v1alpha1.ConcurrencyForbid, v1alpha1.ConcurrencyReplace, v1alpha1.ConcurrencyAllow}))
		}
		if c.MaxRetries != nil && *c.MaxRetries < -1 {
			errs = append(errs, field.Invalid(cp.Child("maxRetries"), *c.MaxRetries, "must be -1 (retry forever) or at least 0"))
		}
		if c.Spec == "" {
			errs = append(errs, field.Required(cp.Child("spec"), "a Go template of the custom resource to submit"))
		} else if _, err := template.New("crd").Option("missingkey=error").Parse(c.Spec); err != nil {
			errs = append(errs, field.Invalid(cp.Child("spec"), "<template>", "is not a valid Go template: "+err.Error()))
		}
	}
	return errs
}

// validatePercent accepts a count >= min or a percentage "N%" with N in [min, 100].
func validatePercent(v *intstr.IntOrString, path *field.Path, min int) field.ErrorList {
	if v.Type == intstr.Int {
		if int(v.IntVal) < min {
			return field.ErrorList{field.Invalid(path, v.IntVal, fmt.Sprintf("must be at least %d, or a percentage such as \"30%%\"", min))}
		}
		return nil
	}
	s := v.StrVal
	n, err := strconv.Atoi(strings.TrimSuffix(s, "%"))
	if !strings.HasSuffix(s, "%") || err != nil || n < min || n > 100 {
		return field.ErrorList{field.Invalid(path, s, fmt.Sprintf("must be a count (at least %d) or a percentage from %d%% to 100%%, e.g. \"30%%\"", min, min))}
	}
	return nil
}

func validateLabels(labels map[string]string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		for _, msg := range validation.IsQualifiedName(k) {
			errs = append(errs, field.Invalid(path.Key(k), k, "label key: "+msg))
		}
		for _, msg := range validation.IsValidLabelValue(labels[k]) {
			errs = append(errs, field.Invalid(path.Key(k), labels[k], "label value: "+msg))
		}
	}
	return errs
}

var taintEffects = []string{string(corev1.TaintEffectNoSchedule), string(corev1.TaintEffectPreferNoSchedule), string(corev1.TaintEffectNoExecute)}

func validateTaints(taints []corev1.Taint, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	for i, t := range taints {
		tp := path.Index(i)
		for _, msg := range validation.IsQualifiedName(t.Key) {
			errs = append(errs, field.Invalid(tp.Child("key"), t.Key, msg))
		}
		if t.Value != "" {
			for _, msg := range validation.IsValidLabelValue(t.Value) {
				errs = append(errs, field.Invalid(tp.Child("value"), t.Value, msg))
			}
		}
		switch string(t.Effect) {
		case taintEffects[0], taintEffects[1], taintEffects[2]:
		default:
			errs = append(errs, field.NotSupported(tp.Child("effect"), t.Effect, taintEffects))
		}
		id := t.Key + ":" + string(t.Effect)
		if seen[id] {
			errs = append(errs, field.Duplicate(tp, id))
		}
		seen[id] = true
	}
	return errs
}

// AWS tag limits (characters).
const (
	maxTagKey   = 128
	maxTagValue = 256
)

func validateTags(tags []map[string]string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	for i, t := range tags {
		tp := path.Index(i)
		for k := range t {
			if k != "key" && k != "value" {
				errs = append(errs, field.Invalid(tp.Key(k), k, "a tag has only key and value"))
			}
		}
		key, ok := t["key"]
		if !ok || key == "" {
			errs = append(errs, field.Required(tp.Child("key"), "the tag key"))
			continue
		}
		if n := utf8.RuneCountInString(key); n > maxTagKey {
			errs = append(errs, field.Invalid(tp.Child("key"), key, fmt.Sprintf("is %d characters; AWS tag keys hold at most %d", n, maxTagKey)))
		}
		if n := utf8.RuneCountInString(t["value"]); n > maxTagValue {
			errs = append(errs, field.Invalid(tp.Child("value"), t["value"], fmt.Sprintf("is %d characters; AWS tag values hold at most %d", n, maxTagValue)))
		}
		if strings.HasPrefix(strings.ToLower(key), "aws:") {
			errs = append(errs, field.Invalid(tp.Child("key"), key, "keys starting with aws: are reserved by AWS"))
		}
		if why := reservedTag(key); why != "" {
			errs = append(errs, field.Forbidden(tp.Child("key"), why))
		}
		if seen[key] {
			errs = append(errs, field.Duplicate(tp.Child("key"), key))
		}
		seen[key] = true
	}
	return errs
}

// validateTagSpecifications checks each resource type (one of
// v1alpha1.TagSpecificationResourceTypes, each once) and its tags (as
// validateTags).
func validateTagSpecifications(specs []v1alpha1.TagSpecification, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	for i, ts := range specs {
		sp := path.Index(i)
		switch {
		case ts.ResourceType == "":
			errs = append(errs, field.Required(sp.Child("resourceType"), "one of "+strings.Join(v1alpha1.TagSpecificationResourceTypes, ", ")))
		case !slices.Contains(v1alpha1.TagSpecificationResourceTypes, ts.ResourceType):
			errs = append(errs, field.NotSupported(sp.Child("resourceType"), ts.ResourceType, v1alpha1.TagSpecificationResourceTypes))
		case seen[ts.ResourceType]:
			errs = append(errs, field.Duplicate(sp.Child("resourceType"), ts.ResourceType))
		}
		seen[ts.ResourceType] = true
		errs = append(errs, validateTags(ts.Tags, sp.Child("tags"))...)
	}
	return errs
}

func validateVolumes(volumes []v1alpha1.NodeVolume, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	for i, v := range volumes {
		vp := path.Index(i)
		if v.Name == "" {
			errs = append(errs, field.Required(vp.Child("name"), "the device name, e.g. /dev/xvda"))
		} else if seen[v.Name] {
			errs = append(errs, field.Duplicate(vp.Child("name"), v.Name))
		}
		seen[v.Name] = true
		if v.Size > 0 && v.SnapshotID != "" {
			errs = append(errs, field.Invalid(vp.Child("snapshotId"), v.SnapshotID, "set size or snapshotId, not both"))
		}
		if v.Iops > 0 && v.Type != "io1" && v.Type != "io2" && v.Type != "gp3" {
			errs = append(errs, field.Invalid(vp.Child("iops"), v.Iops, "only io1, io2 and gp3 volumes take iops"))
		}
		if v.Throughput > 0 && v.Type != "gp3" {
			errs = append(errs, field.Invalid(vp.Child("throughput"), v.Throughput, "only gp3 volumes take throughput"))
		}
	}
	return errs
}

func requiredString(v string, path *field.Path) field.ErrorList {
	if v == "" {
		return field.ErrorList{field.Required(path, "set it in the InstanceGroup or in the boundary ConfigMap's defaults")}
	}
	return nil
}

func requiredList(v []string, path *field.Path, what string) field.ErrorList {
	if len(v) == 0 {
		return field.ErrorList{field.Required(path, "at least one: "+what)}
	}
	var errs field.ErrorList
	for i, s := range v {
		if !subnetLike.MatchString(s) {
			errs = append(errs, field.Invalid(path.Index(i), s, "must be non-empty without spaces"))
		}
	}
	return errs
}
