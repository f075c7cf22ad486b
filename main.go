// Command instance-manager runs the InstanceGroup admission webhooks and
// controllers: the boundary ConfigMap loader, the fan-out of boundary
// changes, and (per provisioner) the reconcilers that build AWS resources.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/instancemgr/instance-manager/app"
	"github.com/instancemgr/instance-manager/version"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

func main() {
	opts := app.Options{}
	opts.BindFlags(flag.CommandLine)
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	printVersion := flag.Bool("version", false, "Print the version, git revision and Go version, and exit.")
	flag.Parse()
	if *printVersion {
		fmt.Println(version.Get())
		return
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	v := version.Get()
	ctrl.Log.WithName("setup").Info("starting instance-manager", "version", v.Version, "revision", v.Revision, "go", v.GoVersion, "platform", v.Platform)

	if err := app.Run(ctrl.SetupSignalHandler(), ctrl.GetConfigOrDie(), opts); err != nil {
		fmt.Fprintln(os.Stderr, "instance-manager:", err)
		os.Exit(1)
	}
}
