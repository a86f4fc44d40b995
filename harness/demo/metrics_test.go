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

	var once sync.Once
	scraped := make(chan string, 1)
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
	// Scrape while the demo runs: after its first progress report the
	// daemon has started and handled work.
	o.Progress = func(p demo.Progress) {
		if p.Catalogued > 0 {
			once.Do(func() { scraped <- scrape(t, srv.URL) })
		}
	}
	rep, err := demo.Run(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() {
		t.Fatalf("audit failed: %+v", rep)
	}
	var body string
	select {
	case body = <-scraped:
	default:
		t.Fatal("the demo never reported progress with a catalogued package")
	}
	exported := map[string]bool{}
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, "# TYPE ") {
			exported[strings.Fields(line)[2]] = true
		}
	}
	for _, name := range want {
		if !exported[name] {
			t.Errorf("metric %s is queried by dashboards/ but not exported", name)
		}
	}
	for _, name := range []string{"process_cpu_seconds_total", "go_goroutines"} {
		if !exported[name] {
			t.Errorf("runtime metric %s not exported", name)
		}
	}
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
