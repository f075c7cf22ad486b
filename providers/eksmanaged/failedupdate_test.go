package eksmanaged

import (
	"reflect"
	"strings"
	"testing"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/aws/smithy-go"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
)

// A version update that fails (EKS: PodEvictionFailure after 15 minutes,
// the node group back to ACTIVE on its old version) is not sent again
// until the spec asks for something else; its errors (DescribeUpdate)
// are in the observation's message. A restarted controller (no update id
// remembered) finds it by ListUpdates.
func TestFailedVersionUpdateIsNotSentAgainUntilTheSpecChanges(t *testing.T) {
	e := newEnv()
	ig := managedGroup(v1alpha1.EKSManagedConfiguration{Subnets: []string{"subnet-a"}, Version: "1.29"})
	e.apply(t, ig)
	e.eks.settle()
	e.eks.takeCalls()

	ig.Spec.EKSManaged.Configuration.Version = "1.30"
	e.eks.failNext = &ekstypes.ErrorDetail{ErrorCode: ekstypes.ErrorCodePodEvictionFailure,
		ErrorMessage: awssdk.String("Reached max retries while trying to evict pods from nodes in node group"), ResourceIds: []string{"ip-10-0-1-5.ec2.internal"}}
	e.apply(t, ig)
	if calls := e.eks.takeCalls(); !reflect.DeepEqual(calls, []string{"UpdateNodegroupVersion 1.30 "}) {
		t.Fatalf("calls %v, want the version update", calls)
	}
	e.eks.settle() // it fails
	if v := awssdk.ToString(e.eks.groups[ngName].Version); v != "1.29" {
		t.Fatalf("the fake left version %s after a failed update", v)
	}
	for _, restarted := range []bool{false, true} {
		if restarted {
			e.p.versions = versionUpdates{}
		}
		obs := e.apply(t, ig)
		if calls := e.eks.takeCalls(); calls != nil {
			t.Fatalf("restarted %v: calls %v; a failed update is not sent again", restarted, calls)
		}
		if !strings.Contains(obs.Message, "failed (PodEvictionFailure: Reached max retries") || !strings.Contains(obs.Message, "ip-10-0-1-5.ec2.internal") ||
			!strings.Contains(obs.Message, "not sent again until the spec changes") {
			t.Fatalf("restarted %v: message %q", restarted, obs.Message)
		}
	}
	// The admin sets forceVersionUpdate: the same update is sent once,
	// with force (the failed one was not forced).
	ig.Spec.EKSManaged.Configuration.ForceVersionUpdate = true
	e.eks.failNext = &ekstypes.ErrorDetail{ErrorCode: ekstypes.ErrorCodeUnknown, ErrorMessage: awssdk.String("failed anyway")}
	e.apply(t, ig)
	if calls := e.eks.takeCalls(); !reflect.DeepEqual(calls, []string{"UpdateNodegroupVersion 1.30  force"}) {
		t.Fatalf("calls %v with forceVersionUpdate, want the update forced", calls)
	}
	e.eks.settle() // fails, forced: not sent again either
	if obs := e.apply(t, ig); e.eks.takeCalls() != nil || !strings.Contains(obs.Message, "failed anyway") {
		t.Fatalf("a failed forced update was sent again, or not reported: %q", obs.Message)
	}
	ig.Spec.EKSManaged.Configuration.ForceVersionUpdate = false

	// The spec asks for another version: sent.
	ig.Spec.EKSManaged.Configuration.Version = "1.31"
	e.apply(t, ig)
	if calls := e.eks.takeCalls(); !reflect.DeepEqual(calls, []string{"UpdateNodegroupVersion 1.31 "}) {
		t.Fatalf("calls %v after the spec changed, want the new version update", calls)
	}
}

// When the update history cannot be read (AccessDenied on ListUpdates for
// a policy that predates it), the version update is sent as before.
func TestVersionUpdateIsSentWhenItsHistoryCannotBeRead(t *testing.T) {
	e := newEnv()
	ig := managedGroup(v1alpha1.EKSManagedConfiguration{Subnets: []string{"subnet-a"}, Version: "1.29"})
	e.apply(t, ig)
	e.eks.settle()
	e.eks.takeCalls()
	e.eks.listErr = &smithy.GenericAPIError{Code: "AccessDeniedException", Message: "not authorized to perform: eks:ListUpdates"}
	ig.Spec.EKSManaged.Configuration.Version = "1.30"
	e.apply(t, ig)
	if calls := e.eks.takeCalls(); !reflect.DeepEqual(calls, []string{"UpdateNodegroupVersion 1.30 "}) {
		t.Fatalf("calls %v, want the version update sent", calls)
	}
}

// Review 2026-11-29 N7: a group waiting for an upgrade slot (reconciled
// every poll interval) reads no update history; an update that ended is
// read once, and its failure is then said without a call.
func TestVersionUpdateHistoryIsReadOnlyWithASlot(t *testing.T) {
	e := newEnv()
	ig := managedGroup(v1alpha1.EKSManagedConfiguration{Subnets: []string{"subnet-a"}, Version: "1.29"})
	e.apply(t, ig)
	e.eks.settle()
	e.eks.takeCalls()
	ig.Spec.EKSManaged.Configuration.Version = "1.30"
	e.eks.historyReads = 0
	for range 3 {
		if obs, calls := e.applyWith(t, ig, &fakeDisruptions{}); calls != nil || !obs.WaitingForSlot {
			t.Fatalf("without a slot: calls %v, waiting for a slot %v", calls, obs.WaitingForSlot)
		}
	}
	if e.eks.historyReads != 0 {
		t.Fatalf("%d update history reads while waiting for a slot, want none", e.eks.historyReads)
	}
	e.eks.failNext = &ekstypes.ErrorDetail{ErrorCode: ekstypes.ErrorCodePodEvictionFailure, ErrorMessage: awssdk.String("evictions failed")}
	if _, calls := e.applyWith(t, ig, &fakeDisruptions{admit: true}); !reflect.DeepEqual(calls, []string{"UpdateNodegroupVersion 1.30 "}) {
		t.Fatalf("with a slot: calls %v, want the version update", calls)
	}
	e.eks.settle() // it fails
	e.eks.historyReads = 0
	for range 3 {
		if obs, calls := e.applyWith(t, ig, &fakeDisruptions{}); calls != nil || !strings.Contains(obs.Message, "evictions failed") {
			t.Fatalf("after the failure: calls %v, message %q", calls, obs.Message)
		}
	}
	if e.eks.historyReads != 1 {
		t.Fatalf("%d update history reads in 3 passes after the update failed, want 1", e.eks.historyReads)
	}
}
