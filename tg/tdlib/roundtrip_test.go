//go:build libtdjson

package tdlib

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/zelenin/go-tdlib/client"
)

// The pump re-encodes the updates go-tdlib has decoded (go-tdlib writes
// some int64 fields as numbers where TDLib writes strings, omits nothing
// that TDLib omits, and so on). These tests check that the decoder reads
// go-tdlib's re-encoding exactly as it reads TDLib's own JSON.

func reencode(t *testing.T, v any) []byte {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestReencodedUpdates(t *testing.T) {
	t.Parallel()
	for _, name := range []string{
		"update_new_message.json",
		"update_send_succeeded.json",
		"update_send_failed.json",
		"update_send_failed_429.json",
		"update_delete_messages.json",
		"update_chat_last_message.json",
		"update_chat_last_message_empty.json",
		"update_connection_state.json",
		"update_file_progress.json",
		"update_file_done.json",
		"update_option_version.json",
		"update_option_integer.json",
		"update_option_boolean.json",
		"update_option_empty.json",
		"update_forum_topic_info.json",
		"update_message_content.json",
		"update_basic_group_upgraded.json",
		"update_basic_group.json",
		"update_basic_group_banned.json",
		"update_new_message_upgrade_to.json",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			raw := fixture(t, name)
			typ, err := client.UnmarshalType(raw)
			if err != nil {
				t.Fatalf("go-tdlib: %v", err)
			}
			if !isPortUpdate(typ.GetType()) {
				t.Fatalf("the pump would skip %s", typ.GetType())
			}
			want, ok, err := decodeUpdate(raw)
			if err != nil || !ok {
				t.Fatalf("decode TDLib JSON: %v, %v", ok, err)
			}
			got, ok, err := decodeUpdate(reencode(t, typ))
			if err != nil || !ok {
				t.Fatalf("decode go-tdlib's JSON: %v, %v", ok, err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("go-tdlib's JSON: %#v\nTDLib's JSON: %#v", got, want)
			}
		})
	}
}

func TestReencodedObjects(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"message_document.json", "message_album.json", "message_topic.json"} {
		raw := fixture(t, name)
		m, err := client.UnmarshalMessage(raw)
		if err != nil {
			t.Fatal(err)
		}
		want, err := decodeMessage(raw)
		if err != nil {
			t.Fatal(err)
		}
		got, err := decodeMessage(reencode(t, m))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: go-tdlib's JSON %+v, TDLib's %+v", name, got, want)
		}
	}
	e, err := client.UnmarshalError(fixture(t, "error_429.json"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := decodeError(reencode(t, e)), decodeError(fixture(t, "error_429.json")); got.Error() != want.Error() {
		t.Errorf("error: go-tdlib's JSON %v, TDLib's %v", got, want)
	}
}
