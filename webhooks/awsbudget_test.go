package webhooks

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/smithy-go/middleware"
)

// TestAWSBudget runs EC2 DescribeImages against a local endpoint that
// counts the requests reaching it: a requester past its budget is refused
// before anything is sent, others and calls outside admission are not.
func TestAWSBudget(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "text/xml")
		_, _ = w.Write([]byte(`<DescribeImagesResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><imagesSet/></DescribeImagesResponse>`))
	}))
	defer srv.Close()
	api := ec2.New(ec2.Options{
		Region: "us-east-1", BaseEndpoint: awssdk.String(srv.URL), RetryMaxAttempts: 1,
		Credentials: credentials.NewStaticCredentialsProvider("AKID", "SECRET", ""),
		APIOptions:  []func(*middleware.Stack) error{AWSBudget(0.001, 2)},
	})
	call := func(ctx context.Context) error {
		_, err := api.DescribeImages(ctx, &ec2.DescribeImagesInput{ImageIds: []string{"ami-12345678"}})
		return err
	}
	alice := context.WithValue(context.Background(), requesterKey{}, "alice")
	for i := 0; i < 2; i++ {
		if err := call(alice); err != nil {
			t.Fatalf("call %d within the budget: %v", i, err)
		}
	}
	err := call(alice)
	if err == nil || !strings.Contains(err.Error(), `"alice"`) || !strings.Contains(err.Error(), "rate limited") {
		t.Errorf("third call: %v, want a refusal naming alice's budget", err)
	}
	if hits.Load() != 2 {
		t.Errorf("%d requests reached AWS, want 2 (the refused call is not sent)", hits.Load())
	}
	if err := call(context.WithValue(context.Background(), requesterKey{}, "bob")); err != nil {
		t.Errorf("another requester: %v", err)
	}
	if err := call(context.Background()); err != nil {
		t.Errorf("a call outside admission: %v", err)
	}
	if hits.Load() != 4 {
		t.Errorf("%d requests reached AWS, want 4", hits.Load())
	}
}
