// Package autoscaling runs instance-manager beside the real Kubernetes
// cluster-autoscaler (AWS provider, built by make tools into bin/) in the
// local environment: control plane with scheduler, kwok kubelets, moto as
// AWS and the instance-to-node bridge. The autoscaler discovers the groups
// by the tags instance-manager puts on them and scales them through moto;
// the tests check that it scales the right group within its bounds, from
// zero with the node template tags, scales empty nodes in, and that a
// rollout and the autoscaler do not fight over desired capacity.
//
// Each test starts its own autoscaler after its groups exist, so that it
// discovers them at once (its AWS provider re-lists groups only every 60s).
package autoscaling

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"go.uber.org/zap/zapcore"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/app"
	"github.com/instancemgr/instance-manager/test/env"
	"github.com/instancemgr/instance-manager/test/harness"
)

const cluster = "ca-cluster"

var (
	environment *env.Environment
	admin       client.Client
	cloud       *fixture
	manager     *harness.Manager
	// controllerCalls records every AWS call instance-manager makes.
	controllerCalls *env.AWSRecorder
	// skipReason is why the environment was not started (the autoscaler
	// binary missing, SKIP_CLUSTER_AUTOSCALER): each test reports it.
	skipReason error
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	level := zapcore.Level(2)
	if os.Getenv("IM_TEST_VERBOSE") != "" {
		level = -1
	}
	ctrl.SetLogger(zap.New(zap.UseDevMode(true), zap.Level(level)))
	if os.Getenv(env.BinDirEnv) == "" {
		fmt.Println("skipping the autoscaler tests: they need the local environment (run make test)")
		return m.Run()
	}
	if env.SkipClusterAutoscaler() {
		fmt.Printf("skipping the autoscaler tests: %s is set\n", env.SkipClusterAutoscalerEnv)
		return m.Run()
	}
	if _, err := env.FindClusterAutoscaler(); err != nil {
		// Every test fails with this message (requireAutoscaler).
		skipReason = err
		return m.Run()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	opts := env.AllComponents()
	opts.CRDDirectoryPaths = []string{harness.CRDPath()}
	opts.WebhookInstallOptions = harness.WebhookOptions()
	opts.Dir = os.Getenv("IM_AUTOSCALING_DIR") // keep the logs there (debugging)
	// Instances take a few seconds to become nodes, as they boot: long
	// enough for the autoscaler and a rollout to overlap.
	opts.JoinDelay = 3 * time.Second
	e, err := env.New(ctx, opts)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "local environment:", err)
		return 1
	}
	environment = e
	defer func() { _ = e.Stop() }()
	if controllerCalls, err = e.NewAWSRecorder("instance-manager"); err == nil {
		if admin, err = client.New(e.Config, client.Options{Scheme: app.Scheme()}); err == nil {
			err = harness.EnsureConfigNamespace(context.Background(), admin)
		}
	}
	if err == nil {
		cloud, err = newFixture(context.Background(), e.AWS)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "setup:", err)
		return 1
	}
	awsCfg := controllerCalls.Config(e.AWS)
	manager, err = harness.StartManager(e.Config, e.Envtest.WebhookInstallOptions, app.Options{
		AWS: &awsCfg, MaxConcurrentUpgrades: 5, Workers: 4,
		DrainTimeout: 30 * time.Second, PollInterval: time.Second, ResyncInterval: 10 * time.Second,
		GCPeriod: time.Hour, GCGrace: time.Hour,
	})
	if err == nil {
		err = harness.SetBoundaries(context.Background(), admin, cloud.boundaries())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
		return 1
	}
	code := m.Run()
	_ = manager.Stop()
	return code
}

// requireAutoscaler skips or fails t when the autoscaler cannot run.
func requireAutoscaler(t *testing.T) {
	t.Helper()
	env.RequireClusterAutoscaler(t)
	if skipReason != nil {
		t.Fatal(skipReason)
	}
	if environment == nil {
		t.Fatal("the local environment did not start (see the output before the tests)")
	}
}

// fixture is what the cluster admin has in AWS: a VPC with two subnets and
// a security group, an EKS cluster, and AMIs.
type fixture struct {
	subnets       []string
	securityGroup string
	amis          []string
}

func newFixture(ctx context.Context, cfg aws.Config) (*fixture, error) {
	ec2c := ec2.NewFromConfig(cfg)
	f := &fixture{}
	vpc, err := ec2c.CreateVpc(ctx, &ec2.CreateVpcInput{CidrBlock: aws.String("10.1.0.0/16")})
	if err != nil {
		return nil, fmt.Errorf("CreateVpc: %w", err)
	}
	for i, az := range []string{"us-west-2a", "us-west-2b"} {
		sn, err := ec2c.CreateSubnet(ctx, &ec2.CreateSubnetInput{
			VpcId: vpc.Vpc.VpcId, CidrBlock: aws.String(fmt.Sprintf("10.1.%d.0/24", i)), AvailabilityZone: aws.String(az)})
		if err != nil {
			return nil, fmt.Errorf("CreateSubnet: %w", err)
		}
		f.subnets = append(f.subnets, aws.ToString(sn.Subnet.SubnetId))
	}
	sg, err := ec2c.CreateSecurityGroup(ctx, &ec2.CreateSecurityGroupInput{
		GroupName: aws.String("ca-nodes"), Description: aws.String("nodes"), VpcId: vpc.Vpc.VpcId})
	if err != nil {
		return nil, fmt.Errorf("CreateSecurityGroup: %w", err)
	}
	f.securityGroup = aws.ToString(sg.GroupId)
	if _, err := eks.NewFromConfig(cfg).CreateCluster(ctx, &eks.CreateClusterInput{
		Name: aws.String(cluster), RoleArn: aws.String("arn:aws:iam::123456789012:role/eks-cluster"),
		ResourcesVpcConfig: &ekstypes.VpcConfigRequest{SubnetIds: f.subnets},
	}); err != nil {
		return nil, fmt.Errorf("CreateCluster: %w", err)
	}
	images, err := ec2c.DescribeImages(ctx, &ec2.DescribeImagesInput{Filters: []ec2types.Filter{{Name: aws.String("architecture"), Values: []string{"x86_64"}}}})
	if err != nil {
		return nil, fmt.Errorf("DescribeImages: %w", err)
	}
	for _, im := range images.Images {
		f.amis = append(f.amis, aws.ToString(im.ImageId))
	}
	sort.Strings(f.amis)
	if len(f.amis) == 0 {
		return nil, errors.New("the emulator offers no x86_64 AMI")
	}
	return f, nil
}

// boundaries is the admin's boundary ConfigMap: the cluster, image,
// subnets and security group are the admin's; tenants may annotate their
// groups for the cluster-autoscaler.
func (f *fixture) boundaries() map[string]string {
	return map[string]string{
		"boundaries": `shared:
  merge:
  - spec.eks.configuration.labels
  replace:
  - spec.strategy
restricted:
- spec.eks.configuration.clusterName
- spec.eks.configuration.image
- spec.eks.configuration.subnets
- spec.eks.configuration.securityGroups
`,
		"defaults": fmt.Sprintf(`spec:
  provisioner: eks
  strategy:
    type: rollingUpdate
    rollingUpdate:
      maxUnavailable: 1
  eks:
    configuration:
      clusterName: %s
      image: %s
      subnets: [%s, %s]
      securityGroups: [%s]
`, cluster, f.amis[0], f.subnets[0], f.subnets[1], f.securityGroup),
		// Tenants may ask for the cluster-autoscaler's tags.
		"sharedAnnotations": "- " + v1alpha1.AnnotationClusterAutoscalerEnabled + "\n",
	}
}
