package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"

	"stashd/internal/config"
	"stashd/tg"
	"stashd/web"
)

const chatsHelp = `Lists the chats each account knows, from its main and archive chat lists:
chat id, type, title, public @username, the account's membership and rights
(can it post? is it an administrator?), and whether stashd uses the chat as
a source or a destination. Use the ids in the configuration's sources,
destinations and routes.

FILTER keeps the chats whose title or @username contains it (ignoring
case). --topics also lists each forum's topics with their thread ids (the
ids a source's topics and a route's topic take).

The accounts must be logged in (stashd login); nothing is asked. With
--simulate it lists the chats of serve --simulate's world instead.`

func runChats(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return chatsCommand(ctx, args, os.Stdout, os.Stderr)
}

// chatsCommand is stashd chats with its output streams.
func chatsCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("chats", "chats [FILTER] [--config FILE] [flags]", chatsHelp)
	tf := addTelegramFlags(fs)
	account := fs.String("account", "", "only this account (default: every account of the configuration)")
	topics := fs.Bool("topics", false, "also list each forum's topics with their thread ids")
	jsonOut := fs.Bool("json", false, "print one JSON object")
	pos, rc := parseArgs(fs, args, 1)
	if rc >= 0 {
		return rc
	}
	filter := ""
	if len(pos) == 1 {
		filter = pos[0]
	}
	_, p, err := tf.load(fs, config.Login)
	if err != nil {
		printErr(stderr, "chats", err)
		return 2
	}
	if *account != "" && !slicesHasAccount(p, *account) {
		fmt.Fprintf(stderr, "stashd chats: --account: no account %q in the configuration\n", *account)
		return 2
	}
	entries, err := listPlanChats(ctx, p, *account, filter, *topics)
	if *jsonOut {
		out := struct {
			Chats []chatEntry `json:"chats"`
			Error string      `json:"error,omitempty"`
		}{Chats: entries}
		if err != nil {
			out.Error = err.Error()
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(out)
	} else {
		printChats(stdout, entries, filter)
	}
	if err != nil {
		fmt.Fprintf(stderr, "stashd chats: %v\n", err)
		return 1
	}
	return 0
}

func slicesHasAccount(p plan, name string) bool {
	for _, a := range p.accounts {
		if a.name == name {
			return true
		}
	}
	return false
}

// chatEntry is one chat of one account, as stashd chats shows it.
type chatEntry struct {
	Account string `json:"account"`
	ID      int64  `json:"id"`
	// Type is channel, supergroup, forum, basic_group or private.
	Type     string `json:"type"`
	Title    string `json:"title"`
	Username string `json:"username,omitempty"`
	// List is the chat list it is in: main or archive.
	List string `json:"list"`
	// Membership is the account's status: creator, administrator, member,
	// restricted, left or banned.
	Membership      string `json:"membership"`
	CanPost         bool   `json:"can_post"`
	Admin           bool   `json:"admin"`
	CanManageTopics bool   `json:"can_manage_topics,omitempty"`
	// Role is what stashd does with the chat: source, destination,
	// source+destination or none.
	Role   string       `json:"role"`
	Topics []topicEntry `json:"topics,omitempty"`
}

type topicEntry struct {
	ThreadID int64  `json:"thread_id"`
	Name     string `json:"name"`
}

// chatsLimit bounds each chat list read (getChats' limit).
const chatsLimit = 1000

// listPlanChats lists the chats of every account of p (or only of
// account), each account through a client started for the purpose.
func listPlanChats(ctx context.Context, p plan, account, filter string, topics bool) ([]chatEntry, error) {
	r := p.roles()
	entries := []chatEntry{}
	var errs []error
	for _, a := range p.accounts {
		if account != "" && a.name != account {
			continue
		}
		c, err := p.dial(ctx, a.name)
		if err != nil {
			errs = append(errs, fmt.Errorf("account %s: %w", a.name, err))
			continue
		}
		es, err := listChats(ctx, c, a.name, r, filter, topics)
		_ = c.Close()
		entries = append(entries, es...)
		if err != nil {
			errs = append(errs, fmt.Errorf("account %s: %w", a.name, err))
		}
	}
	return entries, errors.Join(errs...)
}

// listChats lists the chats of one account's client: getChats of the
// main and the archive list, then getChat and, for channels and
// supergroups, getSupergroup of each (both answered locally); with topics,
// getForumTopics of each forum, every page.
func listChats(ctx context.Context, c tg.Client, account string, r roles, filter string, topics bool) ([]chatEntry, error) {
	dir, ok := c.(tg.Directory)
	if !ok {
		return nil, errors.New("this Telegram client cannot list chats")
	}
	go drain(c)
	var out []chatEntry
	filter = strings.ToLower(filter)
	for _, archive := range []bool{false, true} {
		ids, err := dir.GetChats(ctx, archive, chatsLimit)
		if err != nil {
			return out, fmt.Errorf("list chats: %w", err)
		}
		list := "main"
		if archive {
			list = "archive"
		}
		for _, id := range ids {
			ch, err := c.GetChat(ctx, id)
			if err != nil {
				return out, fmt.Errorf("chat %d: %w", id, err)
			}
			e := chatEntry{Account: account, ID: int64(id), Type: string(ch.Kind), Title: ch.Title, List: list,
				Membership: string(tg.MemberMember), CanPost: true}
			switch ch.Kind {
			case tg.KindChannel, tg.KindSupergroup, tg.KindForum:
				sg, err := dir.GetSupergroup(ctx, id)
				if err != nil {
					return out, fmt.Errorf("chat %d: %w", id, err)
				}
				e.Username, e.Membership, e.CanPost, e.Admin, e.CanManageTopics =
					sg.Username, string(sg.Status), sg.CanPost, sg.IsAdmin(), sg.CanManageTopics
			}
			if filter != "" && !strings.Contains(strings.ToLower(e.Title), filter) && !strings.Contains(strings.ToLower(e.Username), filter) {
				continue
			}
			e.Role = r.of(id, e.Username)
			if topics && ch.Kind == tg.KindForum {
				ts, err := tg.ForumTopics(ctx, c, id, "")
				if err != nil {
					return out, fmt.Errorf("topics of chat %d: %w", id, err)
				}
				for _, t := range ts {
					e.Topics = append(e.Topics, topicEntry{ThreadID: t.ThreadID, Name: t.Name})
				}
			}
			out = append(out, e)
		}
	}
	return out, nil
}

// drain reads a client's updates until it closes: an adapter's receiver
// may block on a full update channel.
func drain(c tg.Client) {
	for range c.Updates() {
	}
}

func printChats(w io.Writer, entries []chatEntry, filter string) {
	if len(entries) == 0 {
		if filter != "" {
			fmt.Fprintf(w, "no chat matches %q\n", filter)
		} else {
			fmt.Fprintln(w, "no chats")
		}
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ACCOUNT\tCHAT ID\tTYPE\tUSERNAME\tMEMBERSHIP\tCAN POST\tROLE\tLIST\tTITLE")
	for _, e := range entries {
		user := "-"
		if e.Username != "" {
			user = "@" + e.Username
		}
		post := "no"
		if e.CanPost {
			post = "yes"
		}
		if e.CanManageTopics {
			post += ", topics"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.Account, e.ID, e.Type, user, e.Membership, post, e.Role, e.List, web.Printable(e.Title))
		for _, t := range e.Topics {
			fmt.Fprintf(tw, "\t  topic %d\t\t\t\t\t\t\t%s\n", t.ThreadID, web.Printable(t.Name))
		}
	}
	tw.Flush()
}

// telegramFlags are the flags of commands that talk to the accounts'
// Telegram clients: the configuration, read as serve reads it (--config,
// then STASHD_* variables, then the flags), or the world of serve
// --simulate.
type telegramFlags struct {
	configPath *string
	simulate   *bool
	seed       *int64
}

func addTelegramFlags(fs *flag.FlagSet) telegramFlags {
	tf := telegramFlags{
		configPath: fs.String("config", os.Getenv("STASHD_CONFIG"), "TOML configuration file, as serve reads it (env STASHD_CONFIG)"),
		simulate:   fs.Bool("simulate", false, "look at the world of serve --simulate (same --simulate-seed) instead of TDLib accounts"),
		seed:       fs.Int64("simulate-seed", 1, "with --simulate: seed of the simulated world"),
	}
	config.RegisterFlags(fs, "data_dir", "database_url", "api_id", "api_hash", "proxy", "log_level", "log_format")
	return tf
}

// load reads the configuration for mode (config.Simulate with --simulate)
// and returns it with its plan.
func (tf telegramFlags) load(fs *flag.FlagSet, mode config.Mode) (config.Config, plan, error) {
	if *tf.simulate {
		mode = config.Simulate
	}
	cfg, err := config.LoadMode(*tf.configPath, os.Getenv, fs, mode)
	if err != nil {
		return cfg, plan{}, err
	}
	if *tf.simulate {
		world, gen := simulatedWorld(*tf.seed, cfg.DataDir)
		return cfg, generatorPlan(world, gen), nil
	}
	return cfg, configPlan(cfg, configuredLogger(quiet(cfg))), nil
}

// quiet keeps a command's own output readable: the adapter logs warnings
// and errors only, unless the configuration asks for debug.
func quiet(cfg config.Config) config.Config {
	if cfg.LogLevel != "debug" {
		cfg.LogLevel = "warn"
	}
	return cfg
}
