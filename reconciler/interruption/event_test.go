package interruption

import (
	"strings"
	"testing"
)

// Samples written from the field lists of the AWS documentation: Amazon
// EC2 Auto Scaling User Guide, "Amazon EventBridge events for Amazon EC2
// Auto Scaling" (EC2 Instance-terminate Lifecycle Action); Amazon EC2 User
// Guide, "Spot Instance interruption notices", "EC2 instance rebalance
// recommendations", and "Amazon EC2 instance state change events".
const (
	lifecycleSample = `{"version":"0","id":"468fc9c4-7e32-4f5d-9b2e-2b1a0d6b7c11","detail-type":"EC2 Instance-terminate Lifecycle Action",
"source":"aws.autoscaling","account":"123456789012","time":"2026-11-26T12:00:00Z","region":"us-west-2",
"resources":["arn:aws:autoscaling:us-west-2:123456789012:autoScalingGroup:6d1f2c3b:autoScalingGroupName/prod-team-web-0a1b2c3d4e"],
"detail":{"LifecycleActionToken":"87654321-4321-4321-4321-210987654321","AutoScalingGroupName":"prod-team-web-0a1b2c3d4e",
"LifecycleHookName":"instance-manager-drain","EC2InstanceId":"i-1234567890abcdef0","LifecycleTransition":"autoscaling:EC2_INSTANCE_TERMINATING",
"NotificationMetadata":"","Origin":"AutoScalingGroup","Destination":"EC2"}}`
	spotSample = `{"version":"0","id":"12345678-1234-1234-1234-123456789012","detail-type":"EC2 Spot Instance Interruption Warning",
"source":"aws.ec2","account":"123456789012","time":"2026-11-26T12:00:00Z","region":"us-west-2",
"resources":["arn:aws:ec2:us-west-2a:instance/i-1234567890abcdef0"],
"detail":{"instance-id":"i-1234567890abcdef0","instance-action":"terminate"}}`
	rebalanceSample = `{"version":"0","id":"12345678-1234-1234-1234-123456789012","detail-type":"EC2 Instance Rebalance Recommendation",
"source":"aws.ec2","account":"123456789012","time":"2026-11-26T12:00:00Z","region":"us-west-2",
"resources":["arn:aws:ec2:us-west-2a:instance/i-1234567890abcdef0"],"detail":{"instance-id":"i-1234567890abcdef0"}}`
	stateSample = `{"version":"0","id":"7bf73129-1428-4cd3-a780-95db273d1602","detail-type":"EC2 Instance State-change Notification",
"source":"aws.ec2","account":"123456789012","time":"2026-11-26T12:00:00Z","region":"us-west-2",
"resources":["arn:aws:ec2:us-west-2:123456789012:instance/i-1234567890abcdef0"],
"detail":{"instance-id":"i-1234567890abcdef0","state":"shutting-down"}}`
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name    string
		body    string
		want    Event
		wantErr string // a substring of the error; "" for none
	}{
		{name: "lifecycle action", body: lifecycleSample, want: Event{Kind: KindLifecycle, ID: "468fc9c4-7e32-4f5d-9b2e-2b1a0d6b7c11",
			DetailType: DetailLifecycleTerminate, Source: SourceAutoScaling, InstanceID: "i-1234567890abcdef0",
			ScalingGroup: "prod-team-web-0a1b2c3d4e", Hook: "instance-manager-drain", Token: "87654321-4321-4321-4321-210987654321",
			Transition: "autoscaling:EC2_INSTANCE_TERMINATING"}},
		{name: "spot interruption warning", body: spotSample, want: Event{Kind: KindSpot, ID: "12345678-1234-1234-1234-123456789012",
			DetailType: DetailSpotInterruption, Source: SourceEC2, InstanceID: "i-1234567890abcdef0", Action: "terminate"}},
		{name: "rebalance recommendation", body: rebalanceSample, want: Event{Kind: KindRebalance, ID: "12345678-1234-1234-1234-123456789012",
			DetailType: DetailRebalance, Source: SourceEC2, InstanceID: "i-1234567890abcdef0"}},
		{name: "state change", body: stateSample, want: Event{Kind: KindStateChange, ID: "7bf73129-1428-4cd3-a780-95db273d1602",
			DetailType: DetailStateChange, Source: SourceEC2, InstanceID: "i-1234567890abcdef0", State: "shutting-down"}},
		{name: "another detail-type: parsed, nothing to do", body: `{"id":"e1","detail-type":"EC2 Instance Launch Successful","source":"aws.autoscaling","detail":{}}`,
			want: Event{Kind: KindOther, ID: "e1", DetailType: "EC2 Instance Launch Successful", Source: SourceAutoScaling}},
		{name: "a detail-type of ours from another source is not ours", body: `{"id":"e2","detail-type":"EC2 Spot Instance Interruption Warning","source":"my.app","detail":{"instance-id":"i-1"}}`,
			want: Event{Kind: KindOther, ID: "e2", DetailType: DetailSpotInterruption, Source: "my.app"}},
		{name: "not JSON", body: "hello", wantErr: "not an EventBridge event"},
		{name: "Auto Scaling's own test notification (not EventBridge)", body: `{"AccountId":"123456789012","Event":"autoscaling:TEST_NOTIFICATION"}`,
			wantErr: `"detail-type" and "source" must be set`},
		{name: "lifecycle action without the instance", body: strings.Replace(lifecycleSample, `"EC2InstanceId":"i-1234567890abcdef0"`, `"EC2InstanceId":""`, 1),
			wantErr: "detail.EC2InstanceId"},
		{name: "spot warning with a bad instance id", body: strings.Replace(spotSample, `"instance-id":"i-1234567890abcdef0"`, `"instance-id":42`, 1),
			wantErr: "detail"},
		{name: "state change without a state", body: strings.Replace(stateSample, `"state":"shutting-down"`, `"x":"y"`, 1),
			wantErr: "detail.state must be set"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(tc.body)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Parse error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("Parse =\n%+v\nwant\n%+v", got, tc.want)
			}
		})
	}
}

func TestLeaving(t *testing.T) {
	for state, want := range map[string]bool{"pending": false, "running": false, "shutting-down": true, "stopping": true, "stopped": false, "terminated": true} {
		if got := leaving(state); got != want {
			t.Errorf("leaving(%q) = %v, want %v", state, got, want)
		}
	}
}
