package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
	const hash = "0123456789abcdef0123456789abcdef"
	good := "api_id = 1\napi_hash = \"" + hash + "\"\n[[accounts]]\nname = \"main\"\nsources = [\"@abcd\"]\n"
	write := func(body string) string {
		p := filepath.Join(t.TempDir(), "stashd.toml")
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	noEnv := func(string) string { return "" }
	cases := []struct {
		body    string
		account string
		field   string
	}{
		{good, "", "--account"},
		{good, "a b", "--account"},
		{strings.Replace(good, "api_id = 1", "", 1), "main", "api_id"},
		{strings.Replace(good, hash, "", 1), "main", "api_hash"},
		// An account the configuration does not have is refused before
		// any phone number is asked.
		{good, "nosuch", "--account"},
		{"api_id = 1\napi_hash = \"" + hash + "\"\n", "main", "accounts"},
	}
	for _, tc := range cases {
		_, err := loginSettings(write(tc.body), noEnv, nil, tc.account)
		if err == nil || !strings.Contains(err.Error(), tc.field) || strings.Contains(err.Error(), "\n") {
			t.Errorf("loginSettings(%q, %q) = %v; want one line naming %s", tc.body, tc.account, err, tc.field)
		}
	}
	if _, err := loginSettings(write(good), noEnv, nil, "main"); err != nil {
		t.Errorf("complete settings refused: %v", err)
	}
}

// --qr: the link is drawn as a QR code in the terminal, and nothing is
// read for that state.
func TestTerminalAuthorizerDrawsTheQRCode(t *testing.T) {
	var out strings.Builder
	auth := terminalAuthorizer(strings.NewReader(""), &out, func() (string, error) { return "", nil })
	got, err := auth(t.Context(), tdlib.AuthState{Account: "main", Name: tdlib.StateWaitOtherDeviceConfirmation, Link: "tg://login?token=abc"})
	if err != nil || got != "" {
		t.Fatalf("answer %q, %v", got, err)
	}
	text := out.String()
	if !strings.Contains(text, "Link Desktop Device") || !strings.Contains(text, "account main") ||
		strings.Count(text, "█") < 50 || strings.Contains(text, "tg://login") {
		t.Errorf("no QR code drawn:\n%s", text)
	}
}
