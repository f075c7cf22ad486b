package interruption

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/instancemgr/instance-manager/reconciler/drain/fakeeviction"
)

// fakeSQS hands out batches, one per ReceiveMessage (an error when the
// batch is nil), then long-polls (waits for ctx) like an idle queue.
type fakeSQS struct {
	mu       sync.Mutex
	batches  [][]sqstypes.Message
	receives []*sqs.ReceiveMessageInput
	deleted  []string
}

func (f *fakeSQS) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, _ ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	f.mu.Lock()
	f.receives = append(f.receives, in)
	if len(f.batches) > 0 {
		b := f.batches[0]
		f.batches = f.batches[1:]
		f.mu.Unlock()
		if b == nil {
			return nil, errors.New("connection refused")
		}
		return &sqs.ReceiveMessageOutput{Messages: b}, nil
	}
	f.mu.Unlock()
	<-ctx.Done()
	return nil, ctx.Err()
}

func (f *fakeSQS) DeleteMessage(_ context.Context, in *sqs.DeleteMessageInput, _ ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deleted = append(f.deleted, *in.ReceiptHandle)
	return &sqs.DeleteMessageOutput{}, nil
}

func (f *fakeSQS) GetQueueAttributes(context.Context, *sqs.GetQueueAttributesInput, ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	return &sqs.GetQueueAttributesOutput{Attributes: map[string]string{"QueueArn": "arn:aws:sqs:us-west-2:123456789012:im", "VisibilityTimeout": "30"}}, nil
}

func msg(handle, body string) sqstypes.Message {
	return sqstypes.Message{MessageId: awssdk.String("id-" + handle), ReceiptHandle: awssdk.String(handle), Body: awssdk.String(body)}
}

func TestQueue(t *testing.T) {
	w := newWorld(t, fakeeviction.Delete)
	failing := newWorld(t, fakeeviction.Delete)
	// The API server fails: a spot warning cannot be handled now.
	failing.h.Client = interceptor.NewClient(failing.kube.(client.WithWatch), interceptor.Funcs{
		List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
			return errors.New("apiserver down")
		}})

	for _, tc := range []struct {
		name        string
		h           *Handler
		batches     [][]sqstypes.Message
		wantDeleted []string
		receives    int // at least
	}{
		{name: "handled, not ours, ignored and unparseable messages are deleted", h: w.h, batches: [][]sqstypes.Message{{
			msg("spot", spotSample), msg("garbage", "{"), msg("other", `{"id":"x","detail-type":"EC2 Instance Launch Successful","source":"aws.autoscaling","detail":{}}`),
			msg("stranger", `{"id":"y","detail-type":"EC2 Spot Instance Interruption Warning","source":"aws.ec2","detail":{"instance-id":"i-77"}}`),
		}}, wantDeleted: []string{"garbage", "other", "spot", "stranger"}, receives: 2},
		{name: "a message whose handling failed stays for redelivery", h: failing.h, batches: [][]sqstypes.Message{{msg("spot", spotSample)}},
			wantDeleted: nil, receives: 2},
		{name: "a failed receive is retried after a backoff", h: w.h, batches: [][]sqstypes.Message{nil, {msg("garbage", "{")}},
			wantDeleted: []string{"garbage"}, receives: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeSQS{batches: tc.batches}
			// The spot sample's instance is i-1234567890abcdef0: make it
			// the world's node i-1.
			for _, b := range f.batches {
				for i := range b {
					if awssdk.ToString(b[i].ReceiptHandle) == "spot" {
						b[i].Body = awssdk.String(`{"id":"s","detail-type":"EC2 Spot Instance Interruption Warning","source":"aws.ec2","detail":{"instance-id":"i-1","instance-action":"terminate"}}`)
					}
				}
			}
			q := &Queue{URL: "https://sqs.us-west-2.amazonaws.com/123456789012/im", SQS: f, Handler: tc.h, Backoff: time.Millisecond}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error)
			go func() { done <- q.Start(ctx) }()
			deadline := time.Now().Add(5 * time.Second)
			for time.Now().Before(deadline) {
				f.mu.Lock()
				n := len(f.receives)
				f.mu.Unlock()
				if n >= tc.receives {
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			if len(f.receives) < tc.receives {
				t.Fatalf("%d ReceiveMessage calls, want at least %d", len(f.receives), tc.receives)
			}
			for _, in := range f.receives {
				if in.WaitTimeSeconds != 20 || in.MaxNumberOfMessages != 10 || *in.QueueUrl != q.URL {
					t.Errorf("ReceiveMessage %+v, want a long poll (20 s, 10 messages) of %s", in, q.URL)
				}
			}
			slices.Sort(f.deleted)
			if !slices.Equal(f.deleted, tc.wantDeleted) {
				t.Errorf("deleted %q, want %q", f.deleted, tc.wantDeleted)
			}
		})
	}
}

func TestNextBackoff(t *testing.T) {
	for _, tc := range []struct{ cur, first, want time.Duration }{
		{0, 0, time.Second}, {time.Second, 0, 2 * time.Second}, {40 * time.Second, 0, time.Minute}, {time.Minute, 0, time.Minute}, {0, time.Millisecond, time.Millisecond},
	} {
		if got := nextBackoff(tc.cur, tc.first); got != tc.want {
			t.Errorf("nextBackoff(%v, %v) = %v, want %v", tc.cur, tc.first, got, tc.want)
		}
	}
}
