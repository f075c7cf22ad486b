package boundaries

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	// The IANA time zone database, embedded: the controller's image has
	// no /usr/share/zoneinfo, and windows name zones.
	_ "time/tzdata"

	"github.com/robfig/cron/v3"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Maintenance says when nodes may be disrupted for a change (data key
// rollout's windows and freezes): a rollout wave starts, and a group starts
// rotating drifted nodes (or replacing a managed node group), only while
// Open. A rotation under way when a window closes finishes the batch in
// flight and waits. Node-health repairs and spot interruptions are not
// held: they replace nodes that are going anyway.
type Maintenance struct {
	// Windows are the times changes may start; none: at any time.
	Windows []Window
	// Freezes are date ranges when no change starts, windows or not.
	Freezes []Freeze
	// Namespaces narrow the maintenance of their groups (data key
	// rollout's namespaceMaintenance): a group of such a namespace may
	// start a change only when both these and its namespace's windows and
	// freezes allow it, so a namespace's windows can narrow the admin's,
	// never widen them (For).
	Namespaces map[string]*Maintenance

	// narrowedBy is the namespace's Maintenance that For combined with
	// this one; namespace names it in messages.
	narrowedBy *Maintenance
	namespace  string
}

// For returns the maintenance of groups of namespace: m itself when the
// namespace has no entry in Namespaces, else m narrowed by that entry
// (Open holds only when both hold). Rollout waves start on m alone; a
// group's rotation starts on For(its namespace). Nil-safe.
func (m *Maintenance) For(namespace string) *Maintenance {
	if m == nil || m.Namespaces[namespace] == nil {
		return m
	}
	narrowed := *m
	narrowed.Namespaces, narrowed.narrowedBy, narrowed.namespace = nil, m.Namespaces[namespace], namespace
	return &narrowed
}

// Window opens at each activation of a cron schedule, in its time zone,
// for Duration.
type Window struct {
	// Text is the window as the admin wrote it, for messages.
	Text string
	// Duration is how long the window stays open after each activation.
	Duration time.Duration

	schedule cron.Schedule
	location *time.Location
}

// Freeze holds every change from From (inclusive) to To (exclusive).
type Freeze struct {
	Text     string
	From, To time.Time
}

// holds reports whether an activation of w at or before t has a window
// that still holds t.
func (w Window) holds(t time.Time) bool {
	// The first activation after t-Duration is the latest one that can
	// still hold t.
	a := w.schedule.Next(t.In(w.location).Add(-w.Duration))
	// The zero time is no activation at all (a schedule that never
	// activates), not one long ago.
	return !a.IsZero() && !a.After(t)
}

// next returns the first activation of w after t.
func (w Window) next(t time.Time) time.Time {
	return w.schedule.Next(t.In(w.location))
}

// Open reports whether a change may start at t. When it may not, next is
// when it may (the zero time when never within a year: a freeze over every
// window) and why says why not, naming the window or freeze, e.g.
// `outside the maintenance windows ("Sat,Sun 02:00 for 4h Europe/Berlin");
// the next opens at 2026-11-28T02:00:00+01:00`. A nil Maintenance is
// always open.
//
// A Maintenance that For narrowed is open when both its own windows and
// freezes and its namespace's are; the message then names the namespace
// (`outside namespace team-a's maintenance windows (...)`) and next is
// the first time both hold.
func (m *Maintenance) Open(t time.Time) (open bool, next time.Time, why string) {
	if m == nil {
		return true, time.Time{}, ""
	}
	held, whose := m, "the"
	if held.ownOpen(t) && m.narrowedBy != nil {
		held, whose = m.narrowedBy, "namespace "+m.namespace+"'s"
	}
	if held.ownOpen(t) {
		return true, time.Time{}, ""
	}
	next = m.nextOpen(t)
	if f := held.freezeAt(t); f != nil {
		return false, next, fmt.Sprintf("in %s change freeze %s; changes start again at %s", whose, f.Text, stamp(next))
	}
	texts := make([]string, 0, len(held.Windows))
	for _, w := range held.Windows {
		texts = append(texts, fmt.Sprintf("%q", w.Text))
	}
	return false, next, fmt.Sprintf("outside %s maintenance windows (%s); the next opens at %s", whose, strings.Join(texts, ", "), stamp(next))
}

// ownOpen reports whether m's own windows and freezes (not a namespace's
// narrowing) let a change start at t.
func (m *Maintenance) ownOpen(t time.Time) bool {
	return m.freezeAt(t) == nil && (len(m.Windows) == 0 || slices.ContainsFunc(m.Windows, func(w Window) bool { return w.holds(t) }))
}

// freezeAt returns the freeze holding t, if any.
func (m *Maintenance) freezeAt(t time.Time) *Freeze {
	for i := range m.Freezes {
		if f := &m.Freezes[i]; !t.Before(f.From) && t.Before(f.To) {
			return f
		}
	}
	return nil
}

// nextOpen is the first time at or after t when Open holds, searched up
// to a year ahead; the zero time if none. With a namespace's narrowing it
// alternates between the two until both hold at the same time.
func (m *Maintenance) nextOpen(t time.Time) time.Time {
	if m.narrowedBy == nil {
		return m.ownNextOpen(t)
	}
	limit := t.AddDate(1, 0, 0)
	for t.Before(limit) {
		a := m.ownNextOpen(t)
		if a.IsZero() {
			return a
		}
		b := m.narrowedBy.ownNextOpen(a)
		if b.IsZero() || b.Equal(a) {
			return b
		}
		t = b
	}
	return time.Time{}
}

// ownNextOpen is the first time at or after t when m's own windows and
// freezes hold: a window's activation (or t itself when a window holds
// it) outside every freeze, searched up to a year ahead; the zero time if
// none.
func (m *Maintenance) ownNextOpen(t time.Time) time.Time {
	limit := t.AddDate(1, 0, 0)
	for t.Before(limit) {
		if f := m.freezeAt(t); f != nil {
			t = f.To
			continue
		}
		if len(m.Windows) == 0 || slices.ContainsFunc(m.Windows, func(w Window) bool { return w.holds(t) }) {
			return t
		}
		var first time.Time
		for _, w := range m.Windows {
			if n := w.next(t); first.IsZero() || n.Before(first) {
				first = n
			}
		}
		if first.IsZero() {
			return time.Time{}
		}
		t = first
	}
	return time.Time{}
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "no time within a year (every window falls in a freeze)"
	}
	return t.Format(time.RFC3339)
}

// windowFields and freezeFields are the fields of one window and freeze.
var (
	windowFields = []string{"schedule", "days", "start", "duration", "timeZone"}
	freezeFields = []string{"from", "to", "timeZone"}
	weekdays     = map[string]string{"mon": "MON", "tue": "TUE", "wed": "WED", "thu": "THU", "fri": "FRI", "sat": "SAT", "sun": "SUN"}
	cronParser   = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow)
	// cronReference is where a schedule is asked for its first activation
	// at parse time: a five-field schedule repeats within four years (a
	// February 29), so one that has none in the library's five-year search
	// from any date never activates.
	cronReference = time.Date(2024, time.January, 1, 0, 0, 0, 0, time.UTC)
)

// maintenance parses rollout.windows and rollout.freezes (either may be
// absent) into c.Maintenance.
//
//	windows: [{days: [Sat, Sun], start: "02:00", duration: 4h, timeZone: Europe/Berlin},
//	          {schedule: "0 22 * * 1-5", duration: 6h}]
//	freezes: [{from: "2026-12-20", to: "2027-01-04", timeZone: Europe/Berlin}]
//
// A window is a five-field cron schedule (minute hour day-of-month month
// day-of-week), or days and a start time (every day when days is absent),
// each with a duration from 1m to 7 days; timeZone is an IANA name,
// default UTC. A freeze runs from the start of day `from` to the end of day
// `to` in its time zone.
func (p *parser) maintenance(c *Config, m map[string]any, at string) {
	mt := p.windowsAndFreezes(m, at)
	if v, present := m["namespaceMaintenance"]; present {
		p.namespaceMaintenance(&mt, v, at+".namespaceMaintenance")
	}
	if len(mt.Windows) > 0 || len(mt.Freezes) > 0 || len(mt.Namespaces) > 0 {
		c.Maintenance = &mt
	}
}

// windowsAndFreezes parses the windows and freezes of m (either may be
// absent).
func (p *parser) windowsAndFreezes(m map[string]any, at string) Maintenance {
	var mt Maintenance
	if v, present := m["windows"]; present {
		l, ok := v.([]any)
		if !ok || len(l) == 0 {
			p.addf("%s.windows: expected a non-empty list of windows ({days, start, duration, timeZone} or {schedule, duration, timeZone}), got %s", at, kindOf(v))
		}
		for i, e := range l {
			if w, ok := p.window(e, fmt.Sprintf("%s.windows[%d]", at, i)); ok {
				mt.Windows = append(mt.Windows, w)
			}
		}
	}
	if v, present := m["freezes"]; present {
		l, ok := v.([]any)
		if !ok || len(l) == 0 {
			p.addf("%s.freezes: expected a non-empty list of freezes ({from, to, timeZone}), got %s", at, kindOf(v))
		}
		for i, e := range l {
			if f, ok := p.freeze(e, fmt.Sprintf("%s.freezes[%d]", at, i)); ok {
				mt.Freezes = append(mt.Freezes, f)
			}
		}
	}
	return mt
}

// namespaceMaintenance parses rollout.namespaceMaintenance into
// mt.Namespaces:
//
//	namespaceMaintenance:
//	  team-payments: {windows: [{days: [Sun], start: "03:00", duration: 2h, timeZone: Europe/Berlin}]}
//	  team-retail: {freezes: [{from: "2026-11-27", to: "2026-11-30"}]}
//
// Each entry, keyed by a namespace name, has windows and/or freezes as
// rollout's own. They narrow: a group of the namespace starts a change
// only when the admin's windows and freezes and its namespace's allow it.
func (p *parser) namespaceMaintenance(mt *Maintenance, v any, at string) {
	m, ok := v.(map[string]any)
	if !ok || len(m) == 0 {
		p.addf("%s: expected a map from namespace name to {windows, freezes}, got %s", at, kindOf(v))
		return
	}
	for _, ns := range slices.Sorted(maps.Keys(m)) {
		nat := at + "." + ns
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			p.addf("%s: %q is not a namespace name: %s", at, ns, strings.Join(errs, "; "))
			continue
		}
		e, ok := p.object(m[ns], nat, "an object with windows and/or freezes", "windows", "freezes")
		if !ok {
			continue
		}
		if len(e) == 0 {
			p.addf("%s: empty: set windows and/or freezes, or leave the namespace out", nat)
			continue
		}
		if nm := p.windowsAndFreezes(e, nat); len(nm.Windows) > 0 || len(nm.Freezes) > 0 {
			if mt.Namespaces == nil {
				mt.Namespaces = map[string]*Maintenance{}
			}
			mt.Namespaces[ns] = &nm
		}
	}
}

func (p *parser) timeZone(m map[string]any, at string) (*time.Location, string, bool) {
	v, present := m["timeZone"]
	if !present {
		return time.UTC, "UTC", true
	}
	s, ok := v.(string)
	if !ok {
		p.addf("%s.timeZone: expected an IANA time zone name such as Europe/Berlin, got %s", at, kindOf(v))
		return nil, "", false
	}
	loc, err := time.LoadLocation(s)
	if err != nil || s == "" || s == "Local" {
		p.addf("%s.timeZone: %q is not an IANA time zone name (valid: e.g. UTC, Europe/Berlin, America/New_York)", at, s)
		return nil, "", false
	}
	return loc, s, true
}

func (p *parser) window(v any, at string) (Window, bool) {
	m, ok := p.object(v, at, "a window {days, start, duration, timeZone} or {schedule, duration, timeZone}", windowFields...)
	if !ok {
		return Window{}, false
	}
	loc, zone, zoneOK := p.timeZone(m, at)
	errs := len(p.problems)
	w := Window{location: loc}
	dv, present := m["duration"]
	if !present {
		p.addf("%s.duration: required: how long the window stays open, e.g. 4h (from 1m to 168h)", at)
	} else if w.Duration = p.duration(dv, at+".duration", false); w.Duration != 0 && (w.Duration < time.Minute || w.Duration > 7*24*time.Hour) {
		p.addf("%s.duration: %s is out of range (valid: from 1m to 168h)", at, w.Duration)
	}
	spec := ""
	sv, hasSchedule := m["schedule"]
	_, hasDays := m["days"]
	_, hasStart := m["start"]
	switch {
	case hasSchedule && (hasDays || hasStart):
		p.addf("%s: set either schedule (cron) or days and start, not both", at)
	case hasSchedule:
		s, ok := sv.(string)
		if !ok {
			p.addf("%s.schedule: expected a five-field cron schedule such as \"0 22 * * 1-5\", got %s", at, kindOf(sv))
			break
		}
		sched, err := cronParser.Parse(s)
		if err != nil {
			p.addf("%s.schedule: %q is not a five-field cron schedule (minute hour day-of-month month day-of-week, e.g. \"0 22 * * 1-5\"): %v", at, s, err)
			break
		}
		if sched.Next(cronReference).IsZero() {
			// A date no month has (30 2, 31 4): the cron library finds no
			// activation and returns the zero time (review N33).
			p.addf("%s.schedule: %q never activates: no date matches its day of month and month (e.g. February 30, April 31); a window must open at least once", at, s)
			break
		}
		spec, w.Text = s, s
	case hasStart:
		spec, w.Text = p.daysAndStart(m, at)
	default:
		p.addf("%s: set start (and optionally days), or schedule", at)
	}
	if len(p.problems) > errs || !zoneOK || spec == "" {
		return Window{}, false
	}
	w.schedule, _ = cronParser.Parse(spec)
	w.Text = fmt.Sprintf("%s for %s %s", w.Text, w.Duration, zone)
	return w, true
}

// daysAndStart turns {days, start} into a cron schedule and its text.
func (p *parser) daysAndStart(m map[string]any, at string) (spec, text string) {
	s, ok := m["start"].(string)
	st, err := time.Parse("15:04", s)
	if !ok || err != nil {
		p.addf("%s.start: expected a time of day as HH:MM (24-hour), such as \"02:00\", got %v", at, m["start"])
		return "", ""
	}
	dow, days := "*", []string{}
	if dv, present := m["days"]; present {
		l, ok := dv.([]any)
		if !ok || len(l) == 0 {
			p.addf("%s.days: expected a non-empty list of weekdays (Mon, Tue, Wed, Thu, Fri, Sat, Sun), got %s", at, kindOf(dv))
			return "", ""
		}
		var crons []string
		for i, d := range l {
			ds, _ := d.(string)
			c, ok := weekdays[strings.ToLower(ds)]
			if !ok {
				p.addf("%s.days[%d]: %v is not a weekday (valid: Mon, Tue, Wed, Thu, Fri, Sat, Sun)", at, i, d)
				return "", ""
			}
			crons, days = append(crons, c), append(days, ds)
		}
		dow = strings.Join(crons, ",")
	}
	text = "daily " + s
	if len(days) > 0 {
		text = strings.Join(days, ",") + " " + s
	}
	return fmt.Sprintf("%d %d * * %s", st.Minute(), st.Hour(), dow), text
}

func (p *parser) freeze(v any, at string) (Freeze, bool) {
	m, ok := p.object(v, at, "a freeze {from, to, timeZone}", freezeFields...)
	if !ok {
		return Freeze{}, false
	}
	loc, zone, zoneOK := p.timeZone(m, at)
	if !zoneOK {
		return Freeze{}, false
	}
	day := func(field string) (time.Time, bool) {
		s, ok := m[field].(string)
		d, err := time.ParseInLocation(time.DateOnly, s, loc)
		if !ok || err != nil {
			p.addf("%s.%s: expected a date as YYYY-MM-DD, got %v", at, field, m[field])
			return time.Time{}, false
		}
		return d, true
	}
	from, okFrom := day("from")
	to, okTo := day("to")
	if !okFrom || !okTo {
		return Freeze{}, false
	}
	if to.Before(from) {
		p.addf("%s: to (%s) is before from (%s)", at, m["to"], m["from"])
		return Freeze{}, false
	}
	return Freeze{Text: fmt.Sprintf("%s to %s %s", m["from"], m["to"], zone), From: from, To: to.AddDate(0, 0, 1)}, true
}
