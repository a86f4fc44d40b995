package ingest

import (
	"context"
	"fmt"
	"strings"
	"time"

	"stashd/store"
	"stashd/tg"
)

// TokenPrefix starts the token line of every caption stashd sends. The token
// is what reconciliation searches the destination for.
const TokenPrefix = "stashd:"

// Caption is the caption of part i of pkg, carrying the delivery token.
func Caption(pkg store.Package, part int, token string) string {
	var b strings.Builder
	b.WriteString(pkg.Name)
	if pkg.PartCount > 1 {
		fmt.Fprintf(&b, " (part %d/%d)", part+1, pkg.PartCount)
	}
	b.WriteString("\n")
	b.WriteString(TokenPrefix)
	b.WriteString(token)
	return b.String()
}

// deliver sends every part of pkg to every destination exactly once. Each
// send is preceded by an intent row holding a token that the caption
// carries; an intent this call did not write may have been sent by an
// attempt that crashed before recording it, so the destination is searched
// for its token first and only an unfound part is sent.
func (p *Pipeline) deliver(ctx context.Context, pkg store.Package, parts []tg.Message) error {
	start := time.Now()
	defer p.m.observeStage(StageDeliver, start)
	for _, dest := range p.cfg.Destinations {
		for i, m := range parts {
			d, fresh, err := p.store.EnsureIntent(ctx, pkg.ID, dest, i, p.cfg.Account)
			if err != nil {
				return err
			}
			if d.State == store.DeliverySent {
				continue
			}
			if !fresh {
				found, err := p.findToken(ctx, dest, d.Token)
				if err != nil {
					return fmt.Errorf("reconcile delivery of package %d to %d: %w", pkg.ID, dest, err)
				}
				if found != 0 {
					p.log.Info("delivery reconciled from destination", "package", pkg.ID, "destination", dest, "part", i)
					if err := p.store.MarkSent(ctx, d, found); err != nil {
						return err
					}
					continue
				}
			}
			sent, err := p.tg.Send(ctx, dest, m.Document.File.RemoteID, Caption(pkg, i, d.Token))
			if err != nil {
				return fmt.Errorf("deliver package %d part %d to %d: %w", pkg.ID, i, dest, err)
			}
			// First write after the send: the destination id (the stub).
			// Use a context that survives cancellation so a shutdown in
			// this instant does not forget a message that exists.
			wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			err = p.store.MarkSent(wctx, d, sent.ID)
			cancel()
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// findToken searches dest for a message whose caption carries token.
func (p *Pipeline) findToken(ctx context.Context, dest tg.ChatID, token string) (tg.MessageID, error) {
	msgs, err := p.tg.SearchChatMessages(ctx, tg.Search{Chat: dest, Query: token, Limit: 10, Filter: tg.FilterDocument})
	if err != nil {
		return 0, err
	}
	for _, m := range msgs {
		if strings.Contains(m.Caption, TokenPrefix+token) && m.ID.IsServer() {
			return m.ID, nil
		}
	}
	return 0, nil
}
