package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"stashd/harness/demo"
)

// demoInspection is what stashd demo --doctor and --chats found in the
// settled world.
type demoInspection struct {
	doctor *doctorReport
	chats  []chatEntry
}

// inspectDemo runs doctor's checks (but the configuration file's, which the
// demo has none of) and chats against the demo's settled world.
func inspectDemo(ctx context.Context, s demo.Settled, dataDir string, doctorOn, chatsOn bool) (demoInspection, error) {
	p := worldPlan(s.World, s.Accounts, s.Sources, s.Destinations, s.Topics)
	var out demoInspection
	if doctorOn {
		d := &doctor{}
		d.add("config", "parses", true, "the demo's own configuration", "")
		d.run(ctx, doctorInput{plan: p, databaseURL: s.DatabaseURL, dataDir: dataDir, budget: s.DownloadBudget})
		rep := d.report()
		out.doctor = &rep
	}
	if chatsOn {
		entries, err := listPlanChats(ctx, p, "", "", true)
		if err != nil {
			return out, fmt.Errorf("chats: %w", err)
		}
		out.chats = entries
	}
	return out, nil
}

// print writes the inspection after the audit.
func (in demoInspection) print(w io.Writer) {
	if in.doctor != nil {
		fmt.Fprintln(w, "doctor:")
		printDoctor(w, *in.doctor)
	}
	if in.chats != nil {
		fmt.Fprintln(w, "chats:")
		printChats(w, in.chats, "")
	}
}

// addTo returns the report's JSON with the inspection's "doctor" and
// "chats" beside the audit's fields.
func (in demoInspection) addTo(rep demo.Report) ([]byte, error) {
	b, err := json.Marshal(rep)
	if err != nil || in.doctor == nil && in.chats == nil {
		return b, err
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil {
		return nil, err
	}
	if in.doctor != nil {
		if fields["doctor"], err = json.Marshal(in.doctor); err != nil {
			return nil, err
		}
	}
	if in.chats != nil {
		if fields["chats"], err = json.Marshal(in.chats); err != nil {
			return nil, err
		}
	}
	return json.Marshal(fields)
}
