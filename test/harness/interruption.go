package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/instancemgr/instance-manager/reconciler/interruption"
)

// InterruptionQueue creates, in the emulator behind cfg, the SQS queue
// name and the four EventBridge rules of docs/autoscaling.md's
// "Interruption queue" setup (Auto Scaling terminate lifecycle actions,
// spot interruption warnings, rebalance recommendations, EC2 state
// changes), each targeting the queue, and returns the queue's URL (the
// manager's --interruption-queue, app.Options.InterruptionQueue). The
// rules and the queue are deleted when t ends; t fails on any error.
func InterruptionQueue(t testing.TB, cfg aws.Config, name string) string {
	t.Helper()
	ctx := context.Background()
	q := sqs.NewFromConfig(cfg)
	bus := eventbridge.NewFromConfig(cfg)
	created, err := q.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	attrs, err := q.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: created.QueueUrl,
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
	if err != nil {
		t.Fatal(err)
	}
	rules := map[string]string{
		name + "-lifecycle": `{"source":["aws.autoscaling"],"detail-type":["EC2 Instance-terminate Lifecycle Action"]}`,
		name + "-spot":      `{"source":["aws.ec2"],"detail-type":["EC2 Spot Instance Interruption Warning"]}`,
		name + "-rebalance": `{"source":["aws.ec2"],"detail-type":["EC2 Instance Rebalance Recommendation"]}`,
		name + "-state":     `{"source":["aws.ec2"],"detail-type":["EC2 Instance State-change Notification"]}`,
	}
	for rule, pattern := range rules {
		if _, err := bus.PutRule(ctx, &eventbridge.PutRuleInput{Name: aws.String(rule), EventPattern: aws.String(pattern)}); err != nil {
			t.Fatal(err)
		}
		if _, err := bus.PutTargets(ctx, &eventbridge.PutTargetsInput{Rule: aws.String(rule),
			Targets: []ebtypes.Target{{Id: aws.String("queue"), Arn: aws.String(attrs.Attributes["QueueArn"])}}}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_, _ = bus.RemoveTargets(ctx, &eventbridge.RemoveTargetsInput{Rule: aws.String(rule), Ids: []string{"queue"}})
			_, _ = bus.DeleteRule(ctx, &eventbridge.DeleteRuleInput{Name: aws.String(rule)})
		})
	}
	t.Cleanup(func() { _, _ = q.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: created.QueueUrl}) })
	return aws.ToString(created.QueueUrl)
}

// PutSpotInterruptionWarning puts on the default EventBridge bus the
// event EC2 sends two minutes before it reclaims spot instance id
// (source aws.ec2, detail-type "EC2 Spot Instance Interruption Warning",
// detail {instance-id, instance-action: terminate}; EC2 User Guide, "Spot
// Instance interruption notices"). It fails when the bus refuses the entry.
func PutSpotInterruptionWarning(ctx context.Context, cfg aws.Config, id string) error {
	detail, err := json.Marshal(map[string]string{"instance-id": id, "instance-action": "terminate"})
	if err != nil {
		return err
	}
	out, err := eventbridge.NewFromConfig(cfg).PutEvents(ctx, &eventbridge.PutEventsInput{Entries: []ebtypes.PutEventsRequestEntry{{
		Source: aws.String("aws.ec2"), DetailType: aws.String(interruption.DetailSpotInterruption), Detail: aws.String(string(detail)),
		Resources: []string{"arn:aws:ec2:us-west-2a:instance/" + id}}}})
	if err != nil {
		return fmt.Errorf("putting a spot interruption warning for %s: %w", id, err)
	}
	if out.FailedEntryCount > 0 {
		return fmt.Errorf("putting a spot interruption warning for %s: %d entry refused: %s", id, out.FailedEntryCount, aws.ToString(out.Entries[0].ErrorMessage))
	}
	return nil
}
