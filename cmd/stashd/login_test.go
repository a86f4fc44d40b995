package main

import (
	"errors"
	"strings"
	"testing"

	"stashd/internal/config"
	"stashd/tg/tdlib"
)

func TestTerminalAuthorizerAnswersEachState(t *testing.T) {
	in := strings.NewReader("+4915112345678\n12345\n54321\n")
	var out strings.Builder
	asked := 0
	auth := terminalAuthorizer(in, &out, func() (string, error) { asked++; return "s3cret", nil })
	ctx := t.Context()
	got, err := auth(ctx, tdlib.AuthState{Account: "main", Name: tdlib.StateWaitPhoneNumber})
	if err != nil || got != "+4915112345678" {
		t.Fatalf("phone = %q, %v", got, err)
	}
	got, err = auth(ctx, tdlib.AuthState{Name: tdlib.StateWaitCode, CodeType: "authenticationCodeTypeSms"})
	if err != nil || got != "12345" {
		t.Fatalf("code = %q, %v", got, err)
	}
	got, err = auth(ctx, tdlib.AuthState{Name: tdlib.StateWaitCode, Retry: errors.New("PHONE_CODE_INVALID")})
	if err != nil || got != "54321" {
		t.Fatalf("second code = %q, %v", got, err)
	}
	got, err = auth(ctx, tdlib.AuthState{Name: tdlib.StateWaitPassword, PasswordHint: "cat"})
	if err != nil || got != "s3cret" || asked != 1 {
		t.Fatalf("password = %q, %v (asked %d)", got, err, asked)
	}
	text := out.String()
	for _, want := range []string{"account main", "by SMS", "refused that: PHONE_CODE_INVALID", "hint: cat"} {
		if !strings.Contains(text, want) {
			t.Errorf("prompts %q lack %q", text, want)
		}
	}
	if strings.Contains(text, "s3cret") {
		t.Error("the password was echoed")
	}
	if _, err := auth(ctx, tdlib.AuthState{Name: tdlib.StateWaitRegistration}); err == nil {
		t.Error("an unsupported state was answered")
	}
}

func TestLoginSettingsNameTheMissingField(t *testing.T) {
	cases := []struct {
		cfg     config.Config
		account string
		field   string
	}{
		{config.Config{APIID: 1, APIHash: "x"}, "", "--account"},
		{config.Config{APIID: 1, APIHash: "x"}, "a b", "--account"},
		{config.Config{APIHash: "x"}, "main", "api_id"},
		{config.Config{APIID: 1}, "main", "api_hash"},
	}
	for _, tc := range cases {
		err := loginSettings(tc.cfg, tc.account)
		if err == nil || !strings.HasPrefix(err.Error(), tc.field) {
			t.Errorf("loginSettings(%+v, %q) = %v; want an error naming %s", tc.cfg, tc.account, err, tc.field)
		}
	}
	if err := loginSettings(config.Config{APIID: 1, APIHash: "x"}, "main"); err != nil {
		t.Errorf("complete settings refused: %v", err)
	}
}
