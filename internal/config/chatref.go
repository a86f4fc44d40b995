package config

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"stashd/tg"
)

// unmarshalChatRef reads a chat reference written as a string, or as a
// table whose "chat" is one; field reads the table's other keys.
func unmarshalChatRef(v any, chat *string, field func(key string, val any) error) error {
	switch v := v.(type) {
	case string:
		*chat = v
		return nil
	case map[string]any:
		for k, val := range v {
			if k != "chat" {
				if err := field(k, val); err != nil {
					return err
				}
				continue
			}
			str, ok := val.(string)
			if !ok {
				return errors.New("chat must be a string")
			}
			*chat = str
		}
		return nil
	}
	return fmt.Errorf("%v is neither a chat reference nor a table", v)
}

// ChatRef is a parsed chat reference: a numeric chat id or a public
// username to resolve.
type ChatRef struct {
	ID       tg.ChatID
	Username string
}

var usernameRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]{3,31}$`)

// ParseChatRef reads "@name", "https://t.me/name", "t.me/name",
// "https://t.me/c/1234567890[/42]" or a numeric chat id ("-1001234567890").
func ParseChatRef(s string) (ChatRef, error) {
	s = strings.TrimSpace(s)
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n == 0 {
			return ChatRef{}, errors.New("0 is not a chat id")
		}
		return ChatRef{ID: tg.ChatID(n)}, nil
	}
	rest := s
	for _, p := range []string{"https://", "http://"} {
		rest = strings.TrimPrefix(rest, p)
	}
	for _, host := range []string{"t.me/", "telegram.me/", "www.t.me/"} {
		if after, ok := strings.CutPrefix(rest, host); ok {
			parts := strings.Split(strings.Trim(after, "/"), "/")
			if len(parts) >= 2 && parts[0] == "c" {
				n, err := strconv.ParseInt(parts[1], 10, 64)
				if err != nil || n <= 0 {
					return ChatRef{}, fmt.Errorf("%q: t.me/c/ needs a numeric channel id", s)
				}
				id, _ := strconv.ParseInt("-100"+parts[1], 10, 64)
				return ChatRef{ID: tg.ChatID(id)}, nil
			}
			if usernameRE.MatchString(parts[0]) {
				return ChatRef{Username: parts[0]}, nil
			}
			return ChatRef{}, fmt.Errorf("%q is not a t.me link to a public chat", s)
		}
	}
	if name, ok := strings.CutPrefix(s, "@"); ok && usernameRE.MatchString(name) {
		return ChatRef{Username: name}, nil
	}
	return ChatRef{}, fmt.Errorf("%q is not a chat reference: use @username, https://t.me/username, https://t.me/c/ID or a numeric chat id", s)
}
