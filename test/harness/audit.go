package harness

import (
	"context"
	"fmt"
	"io"
	"os"
	"testing"

	"github.com/instancemgr/instance-manager/test/env"
)

// Audit makes t fail if an instance goes with undrained pods while it runs
// (env.Loss, recorded by the bridge b): at the end of t, after one more
// sync so an instance that went in its last second is judged now, each new
// loss is an error naming the instance, its group, the Node and the pods.
// A nil b audits nothing.
func Audit(t *testing.T, b *env.Bridge) {
	t.Helper()
	if b == nil {
		return
	}
	before := len(b.Losses())
	t.Cleanup(func() {
		_ = b.Sync(context.Background())
		losses := b.Losses()
		for _, l := range losses[min(before, len(losses)):] {
			t.Errorf("AUDIT: %s", l)
		}
	})
}

// AuditTotal writes every loss b recorded to errOut and the figure
// "FIGURE undrained_pods N (M instance(s) went undrained)" to out and, when
// path is not empty, appends it to the file path (go test shows a passing package's
// output to nobody: make test prints the file). It returns the number of
// undrained pods; a suite fails when it is not 0, for losses a test's own
// Audit missed (an instance that went after the test ended).
func AuditTotal(b *env.Bridge, out, errOut io.Writer, path string) int {
	if b == nil {
		return 0
	}
	_ = b.Sync(context.Background())
	losses := b.Losses()
	pods := 0
	for _, l := range losses {
		pods += len(l.Pods)
		fmt.Fprintln(errOut, "AUDIT:", l)
	}
	line := fmt.Sprintf("FIGURE undrained_pods %d (%d instance(s) went undrained)", pods, len(losses))
	fmt.Fprintln(out, line)
	if path != "" {
		// Appended: each end-to-end package adds its line.
		if f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
			_, _ = fmt.Fprintln(f, line)
			_ = f.Close()
		}
	}
	return pods
}
