package instancegroup

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

func TestFailureBackoffDoublesToItsCapAndResetsOnSpecChange(t *testing.T) {
	b := newFailureBackoff(time.Second, 5*time.Minute)
	key := types.NamespacedName{Namespace: "team-a", Name: "web"}
	var got []time.Duration
	for range 11 {
		got = append(got, b.failed(key, 1))
	}
	want := []time.Duration{1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300}
	for i := range want {
		if got[i] != want[i]*time.Second {
			t.Fatalf("delays = %v, want %v seconds", got, want)
		}
	}
	if d := b.failed(key, 2); d != time.Second {
		t.Errorf("after a spec change (generation 2) the delay is %s, want 1s", d)
	}
	other := types.NamespacedName{Namespace: "team-b", Name: "web"}
	if d := b.failed(other, 1); d != time.Second {
		t.Errorf("another group's first failure waits %s, want 1s", d)
	}
	b.succeeded(key, 2)
	if d := b.failed(key, 2); d != time.Second {
		t.Errorf("after a success the delay is %s, want 1s", d)
	}
}

func TestStableMessageDropsPerCallNoise(t *testing.T) {
	cases := map[string]string{
		"operation error Auto Scaling: CreateAutoScalingGroup, https response error StatusCode: 400, RequestID: 8f0c1f7e-2d41-4c7b-9d0a-3b1e6a1c2f55, api error ValidationError: bad":                                                            "operation error Auto Scaling: CreateAutoScalingGroup, https response error StatusCode: 400, api error ValidationError: bad",
		"operation error EC2: DescribeSubnets, exceeded maximum number of attempts, 3, https response error StatusCode: 503, RequestID: abc, api error RequestLimitExceeded: slow":                                                               "operation error EC2: DescribeSubnets, exceeded maximum number of attempts, 3, https response error StatusCode: 503, api error RequestLimitExceeded: slow",
		"read tcp 127.0.0.1:53412->127.0.0.1:4566: read: connection reset by peer":                                                                                                                                                               "read tcp 127.0.0.1->127.0.0.1:4566: read: connection reset by peer",
		"operation error EC2: CreateLaunchTemplate, https response error StatusCode: 403, RequestID: 5d2, api error UnauthorizedOperation: You are not authorized to perform this operation. Encoded authorization failure message: Xq3v-9aB_c0": "operation error EC2: CreateLaunchTemplate, https response error StatusCode: 403, api error UnauthorizedOperation: You are not authorized to perform this operation. Encoded authorization failure message: (see the Event)",
		"spec.eks.configuration.subnets: subnet-1 does not exist": "spec.eks.configuration.subnets: subnet-1 does not exist",
	}
	for in, want := range cases {
		if got := stableMessage(in); got != want {
			t.Errorf("stableMessage(%q)\n = %q\nwant %q", in, got, want)
		}
	}
}
