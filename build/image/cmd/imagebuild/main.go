// Command imagebuild builds, inspects and pushes instance-manager's
// container image without a container engine (see package build/image).
// The Makefile's image, push and release targets run it:
//
//	imagebuild build -o bin/image [-platforms linux/amd64,linux/arm64]
//	imagebuild digest bin/image
//	imagebuild push -layout bin/image registry.example.com/team/instance-manager:0.2.0
//	imagebuild ca-bundle > ca-certificates.crt
//
// build prints the image index digest (sha256:...); push prints the
// pushed reference with its digest; ca-bundle prints the image's CA
// certificates file (the Dockerfile uses it). Registry credentials come from the
// Docker config (~/.docker/config.json, `docker login` or
// `crane auth login`) and its credential helpers.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/instancemgr/instance-manager/build/image"
)

const usage = `usage:
  imagebuild build -o DIR [-repo DIR] [-platforms linux/amd64,linux/arm64]
  imagebuild digest DIR
  imagebuild push -layout DIR IMAGE
  imagebuild ca-bundle`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "imagebuild:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return errors.New(usage)
	}
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	switch args[0] {
	case "build":
		out := fs.String("o", "", "OCI layout directory to write (replaced)")
		repo := fs.String("repo", ".", "root of the instance-manager module")
		platforms := fs.String("platforms", "linux/amd64,linux/arm64", "comma-separated os/arch list")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		if *out == "" {
			return errors.New("build: -o DIR is required\n" + usage)
		}
		meta, err := image.DefaultMetadata(*repo)
		if err != nil {
			return err
		}
		opts := image.Options{Metadata: meta, RepoDir: *repo, Log: func(f string, a ...any) { fmt.Fprintf(os.Stderr, f+"\n", a...) }}
		for _, s := range strings.Split(*platforms, ",") {
			p, err := v1.ParsePlatform(s)
			if err != nil {
				return fmt.Errorf("-platforms: %q: %w (want os/arch, e.g. linux/arm64)", s, err)
			}
			opts.Platforms = append(opts.Platforms, *p)
		}
		digest, err := image.Build(ctx, opts, *out)
		if err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "wrote %s: instance-manager %s (revision %s), %s\n", *out, meta.Version, meta.Revision, *platforms)
		fmt.Println(digest)
		return nil
	case "ca-bundle":
		b, err := image.CABundle()
		if err != nil {
			return err
		}
		_, err = os.Stdout.Write(b)
		return err
	case "digest":
		if len(args) != 2 {
			return errors.New(usage)
		}
		digest, err := image.Digest(args[1])
		if err != nil {
			return err
		}
		fmt.Println(digest)
		return nil
	case "push":
		dir := fs.String("layout", "", "OCI layout directory written by build")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		if *dir == "" || fs.NArg() != 1 {
			return errors.New("push: -layout DIR and one IMAGE (registry/repository:tag) are required\n" + usage)
		}
		pushed, err := image.Push(ctx, *dir, fs.Arg(0))
		if err != nil {
			return err
		}
		fmt.Println(pushed)
		return nil
	}
	return fmt.Errorf("unknown command %q\n%s", args[0], usage)
}
