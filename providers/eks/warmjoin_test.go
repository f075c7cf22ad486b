package eks

import (
	"encoding/base64"
	"io"
	"mime"
	"mime/multipart"
	"net/mail"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/test/env"
)

// A group without a warm pool keeps the user data it always had (a change
// would rotate every group of the fleet); with one, every Linux family
// waits for InService and the kubelet still registers the same labels.
func TestWarmPoolUserData(t *testing.T) {
	for _, family := range []string{v1alpha1.OSFamilyAmazonLinux2, v1alpha1.OSFamilyAmazonLinux2023, v1alpha1.OSFamilyBottlerocket, v1alpha1.OSFamilyWindows} {
		t.Run(family, func(t *testing.T) {
			b := bootstrap{cluster: testCluster, osFamily: family, labels: map[string]string{"team": "a"}}
			cold := b.UserData()
			if strings.Contains(cold, "target-lifecycle-state") || strings.Contains(cold, "should-wait") {
				t.Fatalf("user data of a group without a warm pool waits for InService:\n%s", cold)
			}
			b.waitInService = true
			if family == v1alpha1.OSFamilyWindows {
				if err := b.Validate(); err == nil || !strings.Contains(err.Error(), "spec.eks.warmPool") {
					t.Fatalf("Validate() = %v, want the warmPool refusal", err)
				}
				return
			}
			if err := b.Validate(); err != nil {
				t.Fatal(err)
			}
			warm := b.UserData()
			want := "autoscaling/target-lifecycle-state"
			if family == v1alpha1.OSFamilyBottlerocket {
				want = "[settings.autoscaling]\nshould-wait = true"
			}
			if !strings.Contains(warm, want) {
				t.Fatalf("%q missing from:\n%s", want, warm)
			}
			reg, err := env.ParseUserData(base64.StdEncoding.EncodeToString([]byte(warm)))
			if err != nil || reg.Labels["team"] != "a" {
				t.Fatalf("the kubelet would register labels %v (err %v) from:\n%s", reg.Labels, err, warm)
			}
		})
	}
}

// The join script, run by bash with curl, sleep and bootstrap.sh faked:
// it waits while the instance metadata says Warmed:*, joins once at
// InService, and a second boot does not join (or format) again.
func TestWarmJoinScriptWaitsForInService(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	cases := []struct {
		name   string
		states []string // answers of the lifecycle state, one per poll; "" = IMDS fails
		polls  int      // lifecycle reads before the join
	}{
		{"launched straight into the group", []string{"InService"}, 1},
		{"warmed, then put in service", []string{"Warmed:Running", "Warmed:Running", "Warmed:Running", "InService"}, 4},
		{"metadata never answers", nil, warmWaitUnknown},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			bin := filepath.Join(root, "bin")
			must(t, os.MkdirAll(bin, 0o755))
			states := filepath.Join(root, "states")
			must(t, os.WriteFile(states, []byte(strings.Join(tc.states, "\n")+"\n"), 0o644))
			// curl: the token PUT succeeds; each state read pops a line
			// and fails on an empty one (no answer).
			fakeCommand(t, bin, "curl", `case "$*" in *api/token*) echo token; exit 0 ;; esac
echo x >> "$ROOT/polls"
s=$(head -n1 "$ROOT/states"); sed -i 1d "$ROOT/states"
[ -n "$s" ] || exit 22
echo "$s"`)
			fakeCommand(t, bin, "sleep", "true")
			fakeCommand(t, bin, "bootstrap.sh", `echo "$@" >> "$ROOT/joined"; echo polls $(wc -l < "$ROOT/polls") >> "$ROOT/joined"`)

			b := bootstrap{cluster: testCluster, osFamily: v1alpha1.OSFamilyAmazonLinux2, labels: map[string]string{"team": "a"}, waitInService: true}
			ud := strings.NewReplacer("/var/lib/", root+"/var/lib/", "/etc/eks/bootstrap.sh", filepath.Join(bin, "bootstrap.sh")).Replace(b.UserData())
			run := func(script string) {
				t.Helper()
				cmd := exec.Command("bash", "-c", script)
				cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "ROOT="+root)
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("%v\n%s", err, out)
				}
			}
			run(ud) // first boot: cloud-init runs the user data
			joined, err := os.ReadFile(filepath.Join(root, "joined"))
			must(t, err)
			if !strings.Contains(string(joined), "--node-labels=team=a") {
				t.Fatalf("bootstrap.sh ran with %q", joined)
			}
			if got := strings.TrimSpace(string(joined)[strings.LastIndex(string(joined), "polls"):]); got != "polls "+strconv.Itoa(tc.polls) {
				t.Fatalf("joined after %s lifecycle reads, want %d", got, tc.polls)
			}
			// A later boot: cloud-init runs scripts-per-boot only.
			run(filepath.Join(root, "var/lib/cloud/scripts/per-boot/instance-manager-join.sh"))
			again, _ := os.ReadFile(filepath.Join(root, "joined"))
			if string(again) != string(joined) {
				t.Fatalf("a second boot joined again:\n%s", again)
			}
		})
	}
}

// On amazonlinux2023 the wait is the first shell part of the MIME document
// (cloud-final runs it; nodeadm-run.service starts the kubelet after
// cloud-final), and the PostBootstrap stage runs inside it, before the join.
func TestWarmJoinAL2023HoldsCloudFinal(t *testing.T) {
	b := bootstrap{cluster: testCluster, osFamily: v1alpha1.OSFamilyAmazonLinux2023, labels: map[string]string{"team": "a"}, waitInService: true,
		stages: []v1alpha1.UserDataStage{{Name: "post", Stage: "PostBootstrap", Data: "echo post"}}}
	msg, err := mail.ReadMessage(strings.NewReader(b.UserData()))
	must(t, err)
	_, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	must(t, err)
	r := multipart.NewReader(msg.Body, params["boundary"])
	var types []string
	var first string
	for {
		p, err := r.NextPart()
		if err != nil {
			break
		}
		body := new(strings.Builder)
		_, _ = io.Copy(body, p)
		if first == "" {
			first = body.String()
		}
		types = append(types, p.Header.Get("Content-Type"))
	}
	if len(types) != 2 || !strings.HasPrefix(types[0], "text/x-shellscript") || types[1] != "application/node.eks.aws" {
		t.Fatalf("parts %q, want the shell wait then the NodeConfig", types)
	}
	if !strings.Contains(first, "target-lifecycle-state") || !strings.Contains(first, "echo post") {
		t.Fatalf("first part:\n%s", first)
	}
}

func fakeCommand(t *testing.T, dir, name, body string) {
	t.Helper()
	must(t, os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/bash\n"+body+"\n"), 0o755))
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
