package main

import (
	"math"
	"strings"
	"testing"
	"time"

	"stashd/harness/chaos"
)

// The failover flags of chaos are checked before anything starts: each bad
// value is named, and the acceptance run's values pass.
func TestChaosFailoverFlags(t *testing.T) {
	t.Parallel()
	good := chaos.Options{Kills: 20, Duration: 45 * time.Second, Rate: 8, Instances: 2, Pauses: 5, LeaseTTL: 3 * time.Second,
		LockTTL: 5 * time.Second, SendRate: 6000, Audit: chaos.AuditFull}
	if msg := chaosFlagError(good); msg != "" {
		t.Errorf("the acceptance run's flags refused: %s", msg)
	}
	for flag, change := range map[string]func(*chaos.Options){
		"--instances":    func(o *chaos.Options) { o.Instances = 0 },
		"--pauses":       func(o *chaos.Options) { o.Pauses = -1 },
		"--lease-ttl":    func(o *chaos.Options) { o.LeaseTTL = 10 * time.Millisecond },
		"--lock-ttl":     func(o *chaos.Options) { o.LockTTL = time.Second },
		"--kills":        func(o *chaos.Options) { o.Kills = -1 },
		"--pg-kills":     func(o *chaos.Options) { o.PGKills = -1 },
		"--send-rate":    func(o *chaos.Options) { o.SendRate = math.NaN() },
		"--rate":         func(o *chaos.Options) { o.Rate = math.Inf(1) },
		"--audit":        func(o *chaos.Options) { o.Audit = "deliveries" },
		"--pg-standby":   func(o *chaos.Options) { o.PGStandby = "semi" },
		"--pg-failovers": func(o *chaos.Options) { o.PGFailovers = 2 },
	} {
		o := good
		change(&o)
		if msg := chaosFlagError(o); !strings.HasPrefix(msg, flag+" ") {
			t.Errorf("bad %s: %q, want it named", flag, msg)
		}
	}
	o := good
	o.LeaseTTL = -3 * time.Second
	if msg := chaosFlagError(o); !strings.HasPrefix(msg, "--lease-ttl ") {
		t.Errorf("negative --lease-ttl: %q, want it named", msg)
	}
	// The sustained-load run: no kills at all, Telegram's send budget, a
	// catalogue audit.
	soak := good
	soak.Kills, soak.PGKills, soak.Pauses, soak.SendRate, soak.Audit = 0, 0, 0, 20, chaos.AuditCatalogue
	if msg := chaosFlagError(soak); msg != "" {
		t.Errorf("--kills 0 --pg-kills 0 --send-rate 20 --audit catalogue refused: %s", msg)
	}
	if rc := runChaos([]string{"--instances", "0"}); rc != 2 {
		t.Errorf("chaos --instances 0: exit %d, want 2", rc)
	}
}
