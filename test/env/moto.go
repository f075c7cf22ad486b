package env

import (
	"bytes"
	"cmp"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/go-logr/logr"
)

// moto_server with the fixes and the Auto Scaling behaviours test/env adds
// (motoserver.py loads motoautoscaling.py, motossm.py, motoeksaccess.py
// and motoeksversion.py from its own directory).
var (
	//go:embed motoserver.py
	motoServerPy []byte
	//go:embed motoautoscaling.py
	motoAutoScalingPy []byte
	//go:embed motossm.py
	motoSSMPy []byte
	//go:embed motoeksaccess.py
	motoEKSAccessPy []byte
	//go:embed motoeksversion.py
	motoEKSVersionPy []byte
)

// MotoAutoScalingEnv chooses which Auto Scaling behaviours motoautoscaling.py
// adds to moto: "all", "none" (moto's own), or a comma list of termination,
// hooks, rebalance, activities, warmpool, where "-name" takes one away from
// "all" ("all,-rebalance"). Set in the test process's environment it
// applies to every environment that does not set Options.MotoAutoScaling.
const MotoAutoScalingEnv = "IM_MOTO_AUTOSCALING"

// DefaultMotoAutoScaling is what an environment gets when neither
// Options.MotoAutoScaling nor IM_MOTO_AUTOSCALING chooses: every behaviour,
// AZ rebalancing included. It was off while the product gave surge back
// with a decrement in whichever zone the drained instance was and left
// AZRebalance running during rotations, so rebalancing terminated an
// undrained node in test/e2e TestMaxSurgeLaunchesBeforeDraining (review
// 2026-11-26 H3, issue 24 item 3); the product now gives surge back zone by
// zone and suspends AZRebalance while a group rotates.
const DefaultMotoAutoScaling = "all"

// The AWS identity of the environment: moto accepts any credentials; these
// are the ones moto's documentation uses.
const (
	AWSRegion          = "us-west-2"
	AWSAccessKeyID     = "testing"
	AWSSecretAccessKey = "testing"
)

// startMoto starts moto's server on a free loopback port and waits until it
// answers. It returns the endpoint URL. autoScaling is Options.MotoAutoScaling.
func startMoto(ctx context.Context, bin, logDir, autoScaling string) (*process, string, error) {
	autoScaling = cmp.Or(autoScaling, os.Getenv(MotoAutoScalingEnv), DefaultMotoAutoScaling)
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
		for name, data := range map[string][]byte{"motoserver.py": motoServerPy, "motoautoscaling.py": motoAutoScalingPy, "motossm.py": motoSSMPy, "motoeksaccess.py": motoEKSAccessPy,
			"motoeksversion.py": motoEKSVersionPy} {
			if err := os.WriteFile(filepath.Join(logDir, name), data, 0o644); err != nil {
				return result{}, err
			}
		}
		p, err := startProcess("moto", python, []string{script, "-H", "127.0.0.1", "-p", fmt.Sprint(port)}, logDir,
			MotoAutoScalingEnv+"="+autoScaling,
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
// Failed round trips and server errors are logged to log (loggingTransport).
func newAWSConfig(endpoint string, log logr.Logger) aws.Config {
	return aws.Config{
		HTTPClient:   &http.Client{Transport: loggingTransport{next: awshttp.NewBuildableClient().GetTransport(), log: log}},
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

// SetInsufficientCapacity makes moto's Auto Scaling groups fail every launch
// of these instance types as AWS does when EC2 has no capacity for them
// (InsufficientInstanceCapacity): a Failed scaling activity, no instance,
// the group below its desired capacity and retrying. "type/zone" (e.g.
// "m5.large/us-west-2a") fails only that zone's launches. No types ends it;
// ResetAWS ends it too. Needs the activities behaviour (MotoAutoScalingEnv).
func (e *Environment) SetInsufficientCapacity(ctx context.Context, instanceTypes ...string) error {
	if e.AWSEndpoint == "" {
		return errors.New("SetInsufficientCapacity: the environment runs without AWS")
	}
	body, err := json.Marshal(map[string][]string{"instanceTypes": append([]string{}, instanceTypes...)})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.AWSEndpoint+"/im-emulator/insufficient-capacity", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("SetInsufficientCapacity: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("SetInsufficientCapacity: %s: %s (is the activities behaviour of %s off?)", resp.Status, strings.TrimSpace(string(msg)), MotoAutoScalingEnv)
	}
	return nil
}
