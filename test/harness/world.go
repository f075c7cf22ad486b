package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/instancemgr/instance-manager/app"
	"github.com/instancemgr/instance-manager/test/env"
)

// World is one test package's local environment, started by StartWorld:
// the environment (control plane, and with the options' components moto,
// kwok and the bridge), the admin's client (system:masters) and, when
// asked for, the package's Cloud.
type World struct {
	Env   *env.Environment
	Admin client.Client
	Cloud *Cloud
}

// WorldOptions say what StartWorld starts.
type WorldOptions struct {
	// Name names the package's working-directory variable:
	// IM_<NAME>_DIR keeps the environment's files.
	Name string
	// Env are the environment's components; StartWorld adds the CRDs, the
	// webhook configurations and the directory.
	Env env.Options
	// CIDR, when set, builds the package's Cloud (VPC, subnets, security
	// group, cluster, AMIs) in that VPC range, its names starting with
	// CloudPrefix.
	CIDR, CloudPrefix string
}

// StartWorld starts the local environment (within 5 minutes: a loaded
// machine starts it slowly), makes the admin's client, the controller's
// config namespace and, with o.CIDR, the Cloud. Without the local
// environment installed it returns an error wrapping env.ErrNoEnvironment
// (the package runs its tests, which skip). On any other error nothing
// is left running. Stop ends it.
func StartWorld(o WorldOptions) (*World, error) {
	opts := o.Env
	opts.CRDDirectoryPaths = []string{CRDPath()}
	opts.WebhookInstallOptions = WebhookOptions()
	opts.Dir = os.Getenv("IM_" + strings.ToUpper(o.Name) + "_DIR")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	e, err := env.New(ctx, opts)
	cancel()
	if err != nil {
		if errors.Is(err, env.ErrNoEnvironment) {
			return nil, err
		}
		return nil, fmt.Errorf("local environment: %w", err)
	}
	w := &World{Env: e}
	if w.Admin, err = client.New(e.Config, client.Options{Scheme: app.Scheme()}); err == nil {
		err = EnsureConfigNamespace(context.Background(), w.Admin)
	}
	if err == nil && o.CIDR != "" {
		w.Cloud, err = NewCloud(context.Background(), e.AWS, o.CloudPrefix, o.CIDR)
	}
	if err != nil {
		_ = e.Stop()
		return nil, fmt.Errorf("setup: %w", err)
	}
	return w, nil
}

// Stop stops the environment.
func (w *World) Stop() { _ = w.Env.Stop() }
