package harness

import "time"

// Waits on asynchronous controller work. They are sized for the CI machine
// kind (2 cores) while a second copy of the suites runs beside it
// (make test-stress): an Eventually that times out there is a real failure,
// not a slow machine. On an idle machine these waits end in well under a
// second, so a generous bound costs nothing when the code is right.
const (
	// ConvergeTimeout bounds one controller reaction: a watch event, a
	// reconcile and its write (a condition, a re-admission, an Event).
	ConvergeTimeout = 60 * time.Second
	// PollInterval is how often a wait looks again.
	PollInterval = 200 * time.Millisecond
)
