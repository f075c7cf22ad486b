package main

import (
	"container/heap"
	"time"
)

// The simulation's virtual clock: a queue of what happens next (a group's
// reconcile, the fan-out's move of a group, the rollout's step), taken in
// time order.

// wake kinds.
const (
	wakePass = iota
	wakeMove
	wakeStep
)

type wakeItem struct {
	at   time.Time
	seq  int
	kind int
	g    *fleetGroup
}

type wakeQueue []wakeItem

func (q wakeQueue) Len() int { return len(q) }
func (q wakeQueue) Less(i, j int) bool {
	if !q[i].at.Equal(q[j].at) {
		return q[i].at.Before(q[j].at)
	}
	if q[i].kind != q[j].kind {
		// The rollout's step last: it reads what the reconciles of the
		// same instant reported (see move).
		return q[i].kind < q[j].kind
	}
	return q[i].seq < q[j].seq
}
func (q wakeQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *wakeQueue) Push(x any)   { *q = append(*q, x.(wakeItem)) }
func (q *wakeQueue) Pop() any {
	old := *q
	it := old[len(old)-1]
	*q = old[:len(old)-1]
	return it
}

func (w *fleetWorld) push(at time.Time, kind int, g *fleetGroup) {
	w.seq++
	heap.Push(&w.queue, wakeItem{at: at, seq: w.seq, kind: kind, g: g})
}

// schedule sets g's next reconcile to at (replacing a later one).
func (w *fleetWorld) schedule(g *fleetGroup, at time.Time) {
	if at.IsZero() || (!g.wake.IsZero() && !at.Before(g.wake)) {
		return
	}
	g.wake = at
	w.push(at, wakePass, g)
}
