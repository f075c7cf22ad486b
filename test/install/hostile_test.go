package install_test

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/test/install"
)

// checkHostileTemplatesLeaveTheReplicaRunning has the tenant submit crd
// strategy templates built to exhaust memory or time (security review N2,
// attacks 03 and 04: doubling Go templates, one behind a status branch,
// YAML aliases, placeholders past the output bound) and fails t unless
// each is refused by the replica's webhook (an admission denial, not a
// timeout), the replica is the same process afterwards, and its peak
// resident memory (VmHWM) stayed under the chart's memory limit.
func checkHostileTemplatesLeaveTheReplicaRunning(t *testing.T, tenant *install.Tenant, m *install.Manager, rel *install.Release) {
	t.Helper()
	c, err := rel.ManagerContainer()
	if err != nil {
		t.Fatal(err)
	}
	limit := c.Resources.Limits.Memory()
	if limit == nil || limit.IsZero() {
		t.Fatal("the chart's manager container has no memory limit")
	}
	pid := m.Pid()
	doubling := `{{$a := "0123456789abcdef"}}` + strings.Repeat(`{{$a = printf "%s%s" $a $a}}`, 30) + "{{$a}}"
	laughs := "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
	for i := 'b'; i <= 'j'; i++ {
		prev := "*" + string(i-1)
		laughs += string(i) + ": &" + string(i) + " [" + strings.TrimSuffix(strings.Repeat(prev+", ", 10), ", ") + "]\n"
	}
	ru := "apiVersion: upgrademgr.keikoproj.io/v1alpha1\nkind: RollingUpgrade\nspec:\n  strategy:\n    mode: "
	for i, src := range []string{
		ru + doubling + "\n",
		ru + "{{if .InstanceGroup.Status.ActiveScalingGroupName}}" + doubling + "{{end}}\n",
		laughs,
		ru + "'" + strings.Repeat("${.status.activeScalingGroupName}", 900) + "'\n",
	} {
		ig, err := tenant.ShortGroup()
		if err != nil {
			t.Fatal(err)
		}
		ig.Name = fmt.Sprintf("hostile-%d", i)
		ig.Spec.Strategy = v1alpha1.AwsUpgradeStrategy{Type: v1alpha1.StrategyCRD, CRD: &v1alpha1.CRDUpgradeStrategy{
			CRDName: "rollingupgrades", StatusJSONPath: "{.status.currentStatus}", StatusSuccessString: "completed",
			StatusFailureString: "error", Spec: src}}
		err = tenant.Client.Create(t.Context(), ig)
		if err == nil {
			t.Errorf("hostile template %d was admitted", i)
			_ = tenant.Client.Delete(t.Context(), ig)
			continue
		}
		if !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) {
			t.Errorf("hostile template %d: %v (want the webhook's refusal)", i, err)
		}
	}
	select {
	case <-m.Done():
		t.Fatalf("the replica stopped after the hostile templates: %v", m.Err())
	default:
	}
	if m.Pid() != pid {
		t.Fatalf("the replica was restarted (pid %d, was %d)", m.Pid(), pid)
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("VmHWM %q: %v", v, err)
			}
			t.Logf("the replica's peak resident memory: %d MiB (limit %s)", kb>>10, limit)
			if kb<<10 >= limit.Value() {
				t.Errorf("the replica's peak resident memory %d KiB reached the chart's limit %s", kb, limit)
			}
			return
		}
	}
	t.Fatalf("no VmHWM in /proc/%d/status", pid)
}
