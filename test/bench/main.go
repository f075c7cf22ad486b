// Command bench measures instance-manager's figures (make bench) and prints
// one line per figure, "BENCH <name> <value> <unit>", also written to
// test/bench/results.json. Figures that need the local environment (the
// API server, moto) skip with a line saying so when it is not available.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
	"time"

	"go.uber.org/zap/zapcore"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// figure is one measured number.
type figure struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
	Unit  string  `json:"unit"`
}

type results struct {
	Date    string   `json:"date"`
	Machine string   `json:"machine"`
	Figures []figure `json:"figures"`
	Skipped []string `json:"skipped,omitempty"`
}

func main() {
	out := flag.String("out", "test/bench/results.json", "where to write the figures as JSON")
	admissionFor := flag.Duration("admission-duration", 15*time.Second, "how long the admission load runs")
	clients := flag.Int("clients", 50, "concurrent admission clients")
	only := flag.String("only", "admission,apiserver,aws,rss,fleet", "which groups of figures to measure (comma-separated: admission, apiserver, aws, rss, fleet)")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the run to this file (go tool pprof)")
	heapProfile := flag.String("manager-heapprofile", "", "write a heap profile of the manager at the end of the memory figure to this file (go tool pprof)")
	apiserverProfile := flag.String("apiserver-cpuprofile", "", "write CPU profiles of the API server during InstanceGroup creates (50 clients) to this file, and during as many PlainGroup creates to this file.plain (go tool pprof -diff_base file.plain file)")
	flag.Parse()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fail("cpu profile", err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fail("cpu profile", err)
		}
		defer pprof.StopCPUProfile()
	}
	want := map[string]bool{}
	for _, f := range strings.Split(*only, ",") {
		want[strings.TrimSpace(f)] = true
	}
	ctrl.SetLogger(zap.New(zap.Level(zapcore.ErrorLevel)))

	res := &results{Date: time.Now().UTC().Format(time.RFC3339), Machine: fmt.Sprintf("%s/%s, %d CPU", runtime.GOOS, runtime.GOARCH, runtime.NumCPU())}
	report := func(name string, value float64, unit string) {
		fmt.Printf("BENCH %s %.3f %s\n", name, value, unit)
		res.Figures = append(res.Figures, figure{Name: name, Value: value, Unit: unit})
	}

	if want["admission"] {
		// One client first: the latency of a review that does not queue.
		p99one, _, _, err := benchAdmission(1, *admissionFor/3)
		if err != nil {
			fail("admission", err)
		}
		p99, rps, cpu, err := benchAdmission(*clients, *admissionFor)
		if err != nil {
			fail("admission", err)
		}
		report("admission_p99_ms", float64(p99.Microseconds())/1000, "ms")
		report("admission_throughput_rps", rps, "requests/s")
		report("admission_p99_ms_c1", float64(p99one.Microseconds())/1000, "ms")
		report("admission_cpu_ms_per_review", float64(cpu.Microseconds())/1000, "ms")
		// Little's law: clients that send a review as soon as the last is
		// answered wait, on average, clients x CPU per review / CPUs.
		report("admission_mean_ms_floor_cpu_bound", float64(*clients)*float64(cpu.Microseconds())/1000/float64(runtime.NumCPU()), "ms")
	}

	if want["apiserver"] {
		if err := benchAPIServer(report, *apiserverProfile); err != nil {
			if err == errNoEnvironment {
				fmt.Println("BENCH skipped: create latency and fan-out need the local environment (run make bench)")
				res.Skipped = append(res.Skipped, "create_latency_ratio", "fanout")
			} else {
				fail("api server figures", err)
			}
		}
	}

	if want["aws"] {
		if err := benchAWSCalls(report); err != nil {
			if err == errNoEnvironment {
				fmt.Println("BENCH skipped: the AWS call figures need the local environment (run make bench)")
				res.Skipped = append(res.Skipped, "aws_calls", "rotation_overhead_ratio")
			} else {
				fail("AWS call figures", err)
			}
		}
	}

	if want["rss"] {
		if err := benchRSS(report, *heapProfile); err != nil {
			if err == errNoEnvironment {
				fmt.Println("BENCH skipped: the manager's memory needs the local environment (run make bench)")
				res.Skipped = append(res.Skipped, "manager_rss_mib")
			} else {
				fail("manager memory", err)
			}
		}
	}

	if want["fleet"] {
		// No environment needed: a simulation on a virtual clock.
		if err := benchFleetRollout(report); err != nil {
			fail("fleet rollout", err)
		}
	}

	raw, err := json.MarshalIndent(res, "", "  ")
	if err == nil {
		err = os.WriteFile(*out, append(raw, '\n'), 0o644)
	}
	if err != nil {
		fail("writing results", err)
	}
}

func fail(what string, err error) {
	fmt.Fprintf(os.Stderr, "bench: %s: %v\n", what, err)
	os.Exit(1)
}
