// Package interruption reads the optional interruption queue: an SQS
// queue that EventBridge rules feed with four kinds of event
// (docs/autoscaling.md, "Interruption queue", gives the queue, its policy
// and the rules). It runs
// on the leader only, when the manager has --interruption-queue.
//
//   - "EC2 Instance-terminate Lifecycle Action" (aws.autoscaling) of the
//     drain hook (awsp.DrainHookName) on an Auto Scaling group an
//     InstanceGroup owns: handed to the termination controller
//     (termination.Controller.Accept), so the drain starts within seconds
//     instead of at the next listing (--cloud-poll-period).
//   - "EC2 Spot Instance Interruption Warning" (aws.ec2, two minutes before
//     EC2 reclaims the instance) and "EC2 Instance State-change
//     Notification" to shutting-down, stopping or terminated: the Node of
//     an InstanceGroup's instance is cordoned and drained through the
//     shared drain runner (drain.Drains: Eviction API,
//     PodDisruptionBudgets, the per-group and cluster-wide caps, the
//     drain-started annotation).
//   - "EC2 Instance Rebalance Recommendation": Events only.
//
// A message about an instance or Auto Scaling group no InstanceGroup owns
// is deleted untouched; one whose handling failed transiently (the API
// server) is left for the queue to deliver again after its visibility
// timeout; one that does not parse is deleted with a log line and counted.
package interruption

import (
	"context"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"sigs.k8s.io/controller-runtime/pkg/log"

	awsp "github.com/instancemgr/instance-manager/providers/aws"
)

// Long polling: each ReceiveMessage waits up to WaitSeconds for messages
// and returns up to MaxMessages (the SQS maxima), so an idle queue costs
// one call per 20 s.
const (
	WaitSeconds = 20
	MaxMessages = 10
)

// Queue is a manager.Runnable (leader only) that long-polls the queue at
// URL and hands each message to Handler; meanwhile it advances the
// Handler's drains every Interval.
type Queue struct {
	URL     string
	SQS     awsp.SQSAPI
	Handler *Handler
	// Interval is how often the drains started for interruptions are
	// polled (default 2s; no AWS call).
	Interval time.Duration
	// Backoff is the first wait after a failed ReceiveMessage (default
	// 1s), doubled on each failure in a row up to a minute.
	Backoff time.Duration
}

// NeedLeaderElection implements manager.LeaderElectionRunnable.
func (q *Queue) NeedLeaderElection() bool { return true }

// Start reads the queue until ctx ends.
func (q *Queue) Start(ctx context.Context) error {
	logger := log.FromContext(ctx).WithName("interruption")
	attrs, err := q.SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: awssdk.String(q.URL),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn, sqstypes.QueueAttributeNameVisibilityTimeout}})
	if err != nil {
		logger.Error(err, "reading the interruption queue's attributes (sqs:GetQueueAttributes); reading it anyway", "queue", q.URL)
	} else {
		logger.Info("reading the interruption queue", "queue", q.URL, "arn", attrs.Attributes[string(sqstypes.QueueAttributeNameQueueArn)],
			"visibilityTimeout", attrs.Attributes[string(sqstypes.QueueAttributeNameVisibilityTimeout)])
	}
	interval := q.Interval
	if interval <= 0 {
		interval = 2 * time.Second
	}
	go func() {
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				q.Handler.Pass(ctx)
			}
		}
	}()
	backoff := time.Duration(0)
	for ctx.Err() == nil {
		if err := q.receive(ctx); err != nil && ctx.Err() == nil {
			receiveErrors.WithLabelValues("ReceiveMessage").Inc()
			backoff = nextBackoff(backoff, q.Backoff)
			logger.Error(err, "reading the interruption queue (sqs:ReceiveMessage)", "queue", q.URL, "retryIn", backoff.String())
			select {
			case <-ctx.Done():
			case <-time.After(backoff):
			}
			continue
		}
		backoff = 0
	}
	return nil
}

// nextBackoff doubles the wait after a failure, from first (default 1s)
// up to a minute.
func nextBackoff(cur, first time.Duration) time.Duration {
	if first <= 0 {
		first = time.Second
	}
	if cur <= 0 {
		return first
	}
	return min(2*cur, time.Minute)
}

// receive makes one long-polling ReceiveMessage and handles what it got.
func (q *Queue) receive(ctx context.Context) error {
	out, err := q.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: awssdk.String(q.URL),
		MaxNumberOfMessages: MaxMessages, WaitTimeSeconds: WaitSeconds})
	if err != nil {
		return err
	}
	for _, m := range out.Messages {
		q.message(ctx, m)
	}
	return nil
}

// message handles one message and deletes it unless its handling must be
// retried.
func (q *Queue) message(ctx context.Context, m sqstypes.Message) {
	logger := log.FromContext(ctx).WithName("interruption")
	ev, err := Parse(awssdk.ToString(m.Body))
	if err != nil {
		messages.WithLabelValues("unparseable", string(OutcomeUnparseable)).Inc()
		logger.Info("deleting an unparseable interruption queue message", "messageId", awssdk.ToString(m.MessageId), "error", err.Error())
		q.delete(ctx, m)
		return
	}
	out, err := q.Handler.Handle(ctx, ev)
	messages.WithLabelValues(string(ev.Kind), string(out)).Inc()
	if err != nil || out == OutcomeRetry {
		logger.Info("interruption event left for redelivery", "event", ev.ID, "detailType", ev.DetailType, "instance", ev.InstanceID, "error", errString(err))
		return
	}
	logger.V(1).Info("interruption event", "event", ev.ID, "detailType", ev.DetailType, "instance", ev.InstanceID, "outcome", string(out))
	if out != OutcomeNotOurs && out != OutcomeIgnored {
		logger.Info("interruption event handled", "event", ev.ID, "detailType", ev.DetailType, "instance", ev.InstanceID,
			"scalingGroup", ev.ScalingGroup, "outcome", string(out))
	}
	q.delete(ctx, m)
}

func (q *Queue) delete(ctx context.Context, m sqstypes.Message) {
	if _, err := q.SQS.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: awssdk.String(q.URL), ReceiptHandle: m.ReceiptHandle}); err != nil && ctx.Err() == nil {
		receiveErrors.WithLabelValues("DeleteMessage").Inc()
		log.FromContext(ctx).WithName("interruption").Info("deleting an interruption queue message (sqs:DeleteMessage); it will be delivered again",
			"messageId", awssdk.ToString(m.MessageId), "error", err.Error())
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
