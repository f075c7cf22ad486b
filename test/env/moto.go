package env

import (
	"context"
	_ "embed"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
)

// The AWS identity of the environment: moto accepts any credentials; these
// are the ones moto's documentation uses.
const (
	AWSRegion          = "us-west-2"
	AWSAccessKeyID     = "testing"
	AWSSecretAccessKey = "testing"
)

// startMoto starts moto's server on a free loopback port and waits until it
// answers. It returns the endpoint URL.
//
//go:embed motoserver.py
var motoServerPy []byte

func startMoto(ctx context.Context, bin, logDir string) (*process, string, error) {
	type result struct {
		p   *process
		url string
	}
	r, err := startWithRetry(func() (result, error) {
		port, err := freePort()
		if err != nil {
			return result{}, err
		}
		url := "http://" + hostPort(port)
		// bin is moto_server; its venv's python runs our wrapper with fixes
		// for where moto differs from AWS (motoserver.py).
		python := filepath.Join(filepath.Dir(bin), "python")
		script := filepath.Join(logDir, "motoserver.py")
		if err := os.WriteFile(script, motoServerPy, 0o644); err != nil {
			return result{}, err
		}
		p, err := startProcess("moto", python, []string{script, "-H", "127.0.0.1", "-p", fmt.Sprint(port)}, logDir,
			// moto reads these for the account and default region it reports.
			"AWS_DEFAULT_REGION="+AWSRegion, "AWS_REGION="+AWSRegion,
			"AWS_ACCESS_KEY_ID="+AWSAccessKeyID, "AWS_SECRET_ACCESS_KEY="+AWSSecretAccessKey,
			// AWS-managed IAM policies (AmazonEKSWorkerNodePolicy, ...) exist
			// in every real account; node roles attach them. Loading them
			// costs moto about 2s at the first IAM call after a start or reset.
			"MOTO_IAM_LOAD_MANAGED_POLICIES=true",
			"PYTHONUNBUFFERED=1")
		if err != nil {
			return result{}, err
		}
		err = p.waitReady(ctx, startTimeout, httpCheck(http.DefaultClient, url+"/moto-api/config", ""))
		if err != nil {
			p.stop(time.Second)
			return result{}, err
		}
		return result{p, url}, nil
	})
	return r.p, r.url, err
}

// newAWSConfig returns an aws.Config for the moto endpoint: region
// AWSRegion, static dummy credentials, BaseEndpoint = endpoint. It does not
// read the host's AWS environment or shared config files, so a developer's
// real credentials can never be used by a test.
func newAWSConfig(endpoint string) aws.Config {
	return aws.Config{
		Region:       AWSRegion,
		Credentials:  aws.NewCredentialsCache(credentials.NewStaticCredentialsProvider(AWSAccessKeyID, AWSSecretAccessKey, "")),
		BaseEndpoint: aws.String(endpoint),
		// moto answers immediately or not at all; do not stretch failures.
		RetryMaxAttempts: 3,
	}
}

// resetMoto asks moto to forget every resource (POST /moto-api/reset).
func resetMoto(ctx context.Context, endpoint string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint+"/moto-api/reset", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("reset moto at %s: %w", endpoint, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("reset moto at %s: %s: %s", endpoint, resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}
