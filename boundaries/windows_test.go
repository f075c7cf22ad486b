package boundaries

import (
	"strings"
	"testing"
	"time"
)

func parseMaintenance(t *testing.T, rollout string) *Maintenance {
	t.Helper()
	c, err := Parse(map[string]string{KeyRollout: rollout})
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return c.Maintenance
}

func TestMaintenanceOpen(t *testing.T) {
	berlin, _ := time.LoadLocation("Europe/Berlin")
	at := func(s string) time.Time {
		t.Helper()
		v, err := time.ParseInLocation("2006-01-02 15:04", s, berlin)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	weekend := `windows: [{days: [Sat, Sun], start: "02:00", duration: 4h, timeZone: Europe/Berlin}]`
	for _, c := range []struct {
		name, rollout string
		now           time.Time
		open          bool
		next          time.Time
		why           string
	}{
		// 2026-11-28 is a Saturday.
		{"inside a days window", weekend, at("2026-11-28 03:59"), true, time.Time{}, ""},
		{"at its start", weekend, at("2026-11-28 02:00"), true, time.Time{}, ""},
		{"at its end", weekend, at("2026-11-28 06:00"), false, at("2026-11-29 02:00"),
			`outside the maintenance windows ("Sat,Sun 02:00 for 4h0m0s Europe/Berlin"); the next opens at 2026-11-29T02:00:00+01:00`},
		{"on a weekday", weekend, at("2026-11-25 03:00"), false, at("2026-11-28 02:00"), "the next opens at 2026-11-28T02:00:00+01:00"},
		{"a window across midnight (cron, New York)", `windows: [{schedule: "0 22 * * 1-5", duration: 6h, timeZone: America/New_York}]`,
			at("2026-11-26 09:30"), true, time.Time{}, ""}, // Thursday 03:30 in New York, opened Wednesday 22:00
		{"daily in UTC by default", `windows: [{start: "23:30", duration: 1h}]`, at("2026-11-26 12:00"), false, at("2026-11-27 00:30"),
			`"daily 23:30 for 1h0m0s UTC"`},
		{"a freeze holds an open window", weekend + "\nfreezes: [{from: \"2026-11-28\", to: \"2026-11-28\", timeZone: Europe/Berlin}]",
			at("2026-11-28 03:00"), false, at("2026-11-29 02:00"),
			"in the change freeze 2026-11-28 to 2026-11-28 Europe/Berlin; changes start again at 2026-11-29T02:00:00+01:00"},
		{"a freeze without windows ends at the end of its last day", `freezes: [{from: "2026-12-20", to: "2027-01-03"}]`,
			time.Date(2026, 12, 31, 12, 0, 0, 0, time.UTC), false, time.Date(2027, 1, 4, 0, 0, 0, 0, time.UTC), "changes start again at 2027-01-04T00:00:00Z"},
		{"after a freeze without windows", `freezes: [{from: "2026-12-20", to: "2027-01-03"}]`,
			time.Date(2027, 1, 4, 0, 0, 0, 0, time.UTC), true, time.Time{}, ""},
		{"a window inside a freeze is skipped", `windows: [{start: "02:00", duration: 1h}]` + "\nfreezes: [{from: \"2026-11-27\", to: \"2026-11-29\"}]",
			time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC), false, time.Date(2026, 11, 30, 2, 0, 0, 0, time.UTC), ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := parseMaintenance(t, c.rollout)
			open, next, why := m.Open(c.now)
			if open != c.open || !next.Equal(c.next) || !strings.Contains(why, c.why) {
				t.Fatalf("Open(%s) = %v, %s, %q; want %v, %s, a reason containing %q", c.now, open, next, why, c.open, c.next, c.why)
			}
		})
	}
	var none *Maintenance
	if open, _, _ := none.Open(time.Now()); !open {
		t.Fatal("no maintenance policy: want always open")
	}
}

func TestMaintenanceParseErrors(t *testing.T) {
	for _, c := range []struct{ name, rollout, want string }{
		{"no duration", `windows: [{start: "02:00"}]`, "data.rollout.windows[0].duration: required"},
		{"duration too long", `windows: [{start: "02:00", duration: 200h}]`, "data.rollout.windows[0].duration: 200h0m0s is out of range (valid: from 1m to 168h)"},
		{"bad start", `windows: [{start: "2am", duration: 1h}]`, `data.rollout.windows[0].start: expected a time of day as HH:MM (24-hour)`},
		{"bad day", `windows: [{days: [Sat, Caturday], start: "02:00", duration: 1h}]`, "data.rollout.windows[0].days[1]: Caturday is not a weekday (valid: Mon, Tue, Wed, Thu, Fri, Sat, Sun)"},
		{"both forms", `windows: [{schedule: "0 2 * * *", start: "02:00", duration: 1h}]`, "data.rollout.windows[0]: set either schedule (cron) or days and start, not both"},
		{"bad cron", `windows: [{schedule: "0 2 * *", duration: 1h}]`, `data.rollout.windows[0].schedule: "0 2 * *" is not a five-field cron schedule`},
		{"a date no month has", `windows: [{schedule: "0 3 30 2 *", duration: 1h}]`, `data.rollout.windows[0].schedule: "0 3 30 2 *" never activates: no date matches its day of month and month`},
		{"April 31 in a namespace's window", `namespaceMaintenance: {team-a: {windows: [{schedule: "0 3 31 4 *", duration: 1h}]}}`, `data.rollout.namespaceMaintenance.team-a.windows[0].schedule: "0 3 31 4 *" never activates`},
		{"neither", `windows: [{duration: 1h}]`, "data.rollout.windows[0]: set start (and optionally days), or schedule"},
		{"bad zone", `windows: [{start: "02:00", duration: 1h, timeZone: Mars/Olympus}]`, `data.rollout.windows[0].timeZone: "Mars/Olympus" is not an IANA time zone name`},
		{"unknown field", `windows: [{start: "02:00", duration: 1h, zone: UTC}]`, `data.rollout.windows[0]: unknown field "zone"`},
		{"empty windows", `windows: []`, "data.rollout.windows: expected a non-empty list of windows"},
		{"bad freeze date", `freezes: [{from: "20/12/2026", to: "2027-01-03"}]`, "data.rollout.freezes[0].from: expected a date as YYYY-MM-DD, got 20/12/2026"},
		{"freeze backwards", `freezes: [{from: "2027-01-03", to: "2026-12-20"}]`, "data.rollout.freezes[0]: to (2026-12-20) is before from (2027-01-03)"},
		{"namespace maintenance not a map", `namespaceMaintenance: [team-a]`, "data.rollout.namespaceMaintenance: expected a map from namespace name to {windows, freezes}, got a list"},
		{"not a namespace name", `namespaceMaintenance: {Team_A: {windows: [{start: "02:00", duration: 1h}]}}`, `data.rollout.namespaceMaintenance: "Team_A" is not a namespace name`},
		{"empty namespace entry", `namespaceMaintenance: {team-a: {}}`, "data.rollout.namespaceMaintenance.team-a: empty: set windows and/or freezes"},
		{"unknown namespace field", `namespaceMaintenance: {team-a: {waves: []}}`, `data.rollout.namespaceMaintenance.team-a: unknown field "waves"`},
		{"bad namespace window", `namespaceMaintenance: {team-a: {windows: [{start: "02:00"}]}}`, "data.rollout.namespaceMaintenance.team-a.windows[0].duration: required"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse(map[string]string{KeyRollout: c.rollout})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Parse: %v; want an error containing %q", err, c.want)
			}
		})
	}
}

func TestNamespaceMaintenanceNarrows(t *testing.T) {
	utc := func(day, hm string) time.Time {
		t.Helper()
		v, err := time.Parse("2006-01-02 15:04", day+" "+hm)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	// The admin: nightly 01:00-05:00 UTC, and a freeze on 2026-12-01. Team
	// payments: Sundays 03:00-04:00 only (2026-11-29 is a Sunday). Team
	// retail: frozen 2026-11-27 to 2026-11-29, windows as the admin's.
	m := parseMaintenance(t, `windows: [{start: "01:00", duration: 4h}]
freezes: [{from: "2026-12-01", to: "2026-12-01"}]
namespaceMaintenance:
  team-payments: {windows: [{days: [Sun], start: "03:00", duration: 1h}]}
  team-retail: {freezes: [{from: "2026-11-27", to: "2026-11-29"}]}
`)
	for _, c := range []struct {
		name, namespace string
		now, next       time.Time
		open            bool
		why             string
	}{
		{"another namespace follows the admin", "team-a", utc("2026-11-27", "02:00"), time.Time{}, true, ""},
		{"payments outside its own window", "team-payments", utc("2026-11-27", "02:00"), utc("2026-11-29", "03:00"), false,
			`outside namespace team-payments's maintenance windows ("Sun 03:00 for 1h0m0s UTC"); the next opens at 2026-11-29T03:00:00Z`},
		{"payments inside both", "team-payments", utc("2026-11-29", "03:30"), time.Time{}, true, ""},
		{"payments' window never widens the admin's", "team-payments", utc("2026-11-29", "00:30"), utc("2026-11-29", "03:00"), false,
			`outside the maintenance windows ("daily 01:00 for 4h0m0s UTC")`},
		{"retail frozen inside the admin's window", "team-retail", utc("2026-11-28", "02:00"), utc("2026-11-30", "01:00"), false,
			"in namespace team-retail's change freeze 2026-11-27 to 2026-11-29 UTC; changes start again at 2026-11-30T01:00:00Z"},
		{"the admin's freeze holds every namespace", "team-retail", utc("2026-12-01", "02:00"), utc("2026-12-02", "01:00"), false,
			"in the change freeze 2026-12-01 to 2026-12-01 UTC"},
		// The next time both hold: payments' next Sunday window after the
		// admin's freeze of 2026-12-01 is 2026-12-06 03:00.
		{"both searched together", "team-payments", utc("2026-11-29", "04:30"), utc("2026-12-06", "03:00"), false, "the next opens at 2026-12-06T03:00:00Z"},
	} {
		t.Run(c.name, func(t *testing.T) {
			open, next, why := m.For(c.namespace).Open(c.now)
			if open != c.open || !next.Equal(c.next) || !strings.Contains(why, c.why) {
				t.Fatalf("For(%s).Open(%s) = %v, %s, %q; want %v, %s, a reason containing %q", c.namespace, c.now, open, next, why, c.open, c.next, c.why)
			}
		})
	}
	if m.For("team-a") != m {
		t.Error("a namespace without an entry gets a copy, want the admin's maintenance itself")
	}
	if open, _, _ := m.Open(utc("2026-11-28", "02:00")); !open {
		t.Error("the admin's maintenance alone (rollout waves) is narrowed by a namespace's freeze")
	}
	only := parseMaintenance(t, `namespaceMaintenance: {team-a: {freezes: [{from: "2026-11-27", to: "2026-11-27"}]}}`)
	if open, _, _ := only.For("team-b").Open(utc("2026-11-27", "12:00")); !open {
		t.Error("namespace entries alone: other namespaces are always open")
	}
	if open, _, _ := only.For("team-a").Open(utc("2026-11-27", "12:00")); open {
		t.Error("namespace entries alone: the namespace's freeze does not hold")
	}
}

// A schedule with no activation never holds (review N33: the cron
// library's zero time read as an activation long ago held every instant),
// and a leap day is a date that activates.
func TestWindowWithoutActivationNeverHolds(t *testing.T) {
	never, err := cronParser.Parse("0 3 30 2 *")
	if err != nil {
		t.Fatal(err)
	}
	w := Window{Duration: time.Hour, schedule: never, location: time.UTC}
	if w.holds(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)) {
		t.Error("a window that never activates holds")
	}
	if _, err := Parse(map[string]string{KeyRollout: `windows: [{schedule: "0 3 29 2 *", duration: 1h}]`}); err != nil {
		t.Errorf("a leap-day window: %v", err)
	}
}
