package demo_test

import (
	"bufio"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	"stashd/harness/demo"
	"stashd/internal/pgtest"
	"stashd/route"
)

// Every metric that the dashboard and the alert rules query is exported by
// a running demo's /metrics.
func TestDashboardMetricsAreExported(t *testing.T) {
	t.Parallel()
	want := readMetricList(t, "../../dashboards/metrics.txt")
	handler, set := demo.MetricsHandler()
	srv := httptest.NewServer(handler)
	defer srv.Close()

	o := demo.Options{Seed: 3, Steps: 40, Rate: -1, Sources: 2, Accounts: 2, ForumTopics: 2,
		DatabaseURL: pgtest.New(t), FilesDir: t.TempDir()}
	o.Gatherer = set
	// One route with a delivery window open all day, so that the window
	// metrics are exported too; it sends everything to the destination.
	allDay, err := route.ParseWindow("00:00-24:00", "UTC")
	if err != nil {
		t.Fatal(err)
	}
	o.Routes = []route.Spec{{Name: "all day", Window: &allDay, Destinations: []route.Chat{{Username: "demo_dest1"}},
		Sources: []route.SpecSource{{Chat: route.Chat{Username: "demo_source1"}}, {Chat: route.Chat{Username: "demo_source2"}}, {Chat: route.Chat{Username: "demo_forum"}}}}}
	// Scrape while the demo runs, once the daemon has started and
	// handled work (a progress report with a package catalogued), and at
	// each report after that until every metric is there: a gauge read
	// from the database (the delivery backlog's) first shows once its
	// first read has answered, which a busy machine may put after the
	// first package.
	want = append(want, "process_cpu_seconds_total", "go_goroutines")
	var (
		mu      sync.Mutex
		body    string
		missing []string
	)
	o.Progress = func(p demo.Progress) {
		if p.Catalogued == 0 {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if body != "" && len(missing) == 0 {
			return
		}
		body = scrape(t, srv.URL)
		missing = unexported(body, want)
	}
	rep, err := demo.Run(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() {
		t.Fatalf("audit failed: %+v", rep)
	}
	mu.Lock()
	defer mu.Unlock()
	if body == "" {
		t.Fatal("the demo never reported progress with a catalogued package")
	}
	for _, name := range missing {
		t.Errorf("metric %s is queried by dashboards/ (or is a runtime metric) but not exported", name)
	}
}

// unexported returns the names in want that the exposition body does not
// declare (# TYPE).
func unexported(body string, want []string) []string {
	exported := map[string]bool{}
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, "# TYPE ") {
			exported[strings.Fields(line)[2]] = true
		}
	}
	var out []string
	for _, name := range want {
		if !exported[name] {
			out = append(out, name)
		}
	}
	return out
}

func readMetricList(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line != "" && !strings.HasPrefix(line, "#") {
			out = append(out, line)
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s lists no metric", path)
	}
	return out
}

func scrape(t *testing.T, url string) string {
	resp, err := http.Get(url)
	if err != nil {
		t.Error(err)
		return ""
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Error(err)
	}
	return string(b)
}
