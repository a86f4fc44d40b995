//go:build libtdjson

package tdlib

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/zelenin/go-tdlib/client"

	"stashd/tg"
)

// authHandler walks go-tdlib's authorization loop (client.Authorize, run by
// client.NewClient) from authorizationStateWaitTdlibParameters to
// authorizationStateReady, asking the Config's Authorizer where a person
// must answer.
//
// It never returns an error to go-tdlib. On an error, go-tdlib's loop closes
// the client and then keeps polling getAuthorizationState until it reads
// authorizationStateClosed; the poll that TDLib answers after reporting
// closed makes go-tdlib send on a closed channel and crash the process
// (go-tdlib issue #161). So on failure the handler closes TDLib itself,
// waits for authorizationStateClosed, and ends the goroutine running the loop
// with runtime.Goexit, sending nothing more.
type authHandler struct {
	c   *Client
	ctx context.Context
	// err is why the login failed; set before the goroutine ends.
	err error
	// shownLink is the QR-code link last shown to the Authorizer.
	shownLink string
}

// qrPoll is how often the login looks again while a QR code waits to be
// scanned: go-tdlib's loop asks for the state again as soon as Handle
// returns, and nothing is sent in that state.
const qrPoll = 250 * time.Millisecond

var _ client.AuthorizationStateHandler = (*authHandler)(nil)

// Handle implements client.AuthorizationStateHandler.
func (h *authHandler) Handle(tdc *client.Client, state client.AuthorizationState) error {
	h.c.attach(tdc)
	name := state.AuthorizationStateType()
	h.c.log.Debug("TDLib authorization state", "state", name)
	if err := h.handle(state); err != nil {
		h.fail(name, err)
	}
	return nil
}

// Close implements client.AuthorizationStateHandler; there is nothing to
// release.
func (h *authHandler) Close() {}

func (h *authHandler) handle(state client.AuthorizationState) error {
	if err := h.ctx.Err(); err != nil {
		return err
	}
	switch s := state.(type) {
	case *client.AuthorizationStateWaitTdlibParameters:
		if _, err := h.c.call(h.ctx, setTdlibParametersRequest(h.c.cfg)); err != nil {
			return fmt.Errorf("set TDLib parameters: %w", err)
		}
		if p := h.c.cfg.Proxy; p != nil {
			if _, err := h.c.call(h.ctx, addProxyRequest(*p)); err != nil {
				return fmt.Errorf("add proxy %s: %w", p, err)
			}
			h.c.log.Info("connecting through a proxy", "proxy", p.String())
		}
		return nil
	case *client.AuthorizationStateWaitPhoneNumber:
		if h.c.cfg.QRLogin {
			if _, err := h.c.call(h.ctx, requestQrCodeAuthenticationRequest()); err != nil {
				return fmt.Errorf("request QR-code login: %w", err)
			}
			return nil
		}
		return h.ask(AuthState{Name: StateWaitPhoneNumber})
	case *client.AuthorizationStateWaitOtherDeviceConfirmation:
		if !h.c.cfg.QRLogin {
			return fmt.Errorf("account %s waits for a QR-code confirmation that was not asked for", h.c.cfg.Account)
		}
		// Nothing is sent: the person scans the link with a logged-in
		// app, and TDLib moves on (or shows a fresh link, shown again).
		if s.Link != h.shownLink {
			h.shownLink = s.Link
			if _, err := h.c.cfg.Authorizer(h.ctx, AuthState{Account: h.c.cfg.Account, Name: StateWaitOtherDeviceConfirmation, Link: s.Link}); err != nil {
				return err
			}
		}
		t := time.NewTimer(qrPoll)
		defer t.Stop()
		select {
		case <-t.C:
			return nil
		case <-h.ctx.Done():
			return h.ctx.Err()
		}
	case *client.AuthorizationStateWaitCode:
		st := AuthState{Name: StateWaitCode}
		if s.CodeInfo != nil && s.CodeInfo.Type != nil {
			st.CodeType = s.CodeInfo.Type.AuthenticationCodeTypeType()
		}
		return h.ask(st)
	case *client.AuthorizationStateWaitPassword:
		return h.ask(AuthState{Name: StateWaitPassword, PasswordHint: s.PasswordHint})
	case *client.AuthorizationStateLoggingOut, *client.AuthorizationStateClosing, *client.AuthorizationStateClosed:
		return errTDLibClosing
	default:
		// Email login, registration of a new account, confirmation on
		// another device: only the official apps do these.
		return fmt.Errorf("account %s needs %s, which stashd login does not support: finish it in an official Telegram app", h.c.cfg.Account, state.AuthorizationStateType())
	}
}

// errTDLibClosing: TDLib closed (or logged out) while logging in.
var errTDLibClosing = errors.New("TDLib closed during login")

// ask gets an answer from the Authorizer and sends it, asking again while
// TDLib rejects the answer as invalid (400, e.g. PHONE_CODE_INVALID).
func (h *authHandler) ask(st AuthState) error {
	st.Account = h.c.cfg.Account
	for {
		answer, err := h.c.cfg.Authorizer(h.ctx, st)
		if err != nil {
			return err
		}
		req, err := authAnswerRequest(st.Name, answer)
		if err != nil {
			return err
		}
		_, err = h.c.call(h.ctx, req)
		var te *tg.Error
		switch {
		case err == nil:
			return nil
		case errors.As(err, &te) && te.Code == 400:
			h.c.log.Info("login answer rejected", "state", st.Name, "err", err)
			st.Retry = err
		default:
			return fmt.Errorf("answer %s: %w", st.Name, err)
		}
	}
}

// fail records err, closes TDLib (unless it is closing already), and ends
// the calling goroutine (go-tdlib's authorization loop) without returning
// to go-tdlib. Deferred calls still run, so client.NewClient's caller
// learns of the end through its own defer.
func (h *authHandler) fail(state string, err error) {
	h.err = err
	if terr := h.c.teardown(); terr != nil {
		h.c.log.Warn("close TDLib after failed login", "state", state, "err", terr)
	}
	runtime.Goexit()
}
