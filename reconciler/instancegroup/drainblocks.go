package instancegroup

import (
	"regexp"
	"slices"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// drainBlocks remembers, per group, the cause of the last DrainBlocked
// Event of a managed retirement, so a drain blocked by the same pods is
// announced once, not at every pass (the drain runner hands out a Blocked
// outcome about every 10 s while a PodDisruptionBudget refuses). Kept in
// memory: a restarted controller announces each blockage once more. The
// zero value is ready to use; safe for concurrent use.
type drainBlocks struct {
	mu   sync.Mutex
	last map[types.NamespacedName]string
}

// refusedPod matches a pod a drain names as blocking it: drain.Drainer
// words each as "<namespace>/<name>: eviction refused: <why>".
var refusedPod = regexp.MustCompile(`([^\s;:]+/[^\s;:]+): eviction refused`)

// blockCause is what identifies a blockage: the sorted set of pods whose
// eviction was refused, or the whole message when it names none.
func blockCause(blocked string) string {
	var pods []string
	for _, m := range refusedPod.FindAllStringSubmatch(blocked, -1) {
		pods = append(pods, m[1])
	}
	if len(pods) == 0 {
		return blocked
	}
	slices.Sort(pods)
	return strings.Join(slices.Compact(pods), ",")
}

// announce reports whether blocked, the group key's blockage this pass,
// has a cause other than the last one announced for key (and records it).
func (b *drainBlocks) announce(key types.NamespacedName, blocked string) bool {
	cause := blockCause(blocked)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.last == nil {
		b.last = map[types.NamespacedName]string{}
	}
	if b.last[key] == cause {
		return false
	}
	b.last[key] = cause
	return true
}

// forget drops what is remembered for key (its retirement ended, or the
// group is gone).
func (b *drainBlocks) forget(key types.NamespacedName) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.last, key)
}
