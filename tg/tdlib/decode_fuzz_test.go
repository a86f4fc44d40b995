package tdlib

import (
	"os"
	"path/filepath"
	"testing"

	"stashd/tg"
)

// fuzzDecoders are the TDLib JSON decoders FuzzDecode picks from with its
// first argument: everything the adapter reads off TDLib passes one.
var fuzzDecoders = [...]func(t *testing.T, data []byte){
	func(t *testing.T, d []byte) {
		u, ok, err := decodeUpdate(d)
		if ok && (err != nil || u == nil) {
			t.Fatalf("decodeUpdate: ok with update %v and error %v", u, err)
		}
	},
	func(t *testing.T, d []byte) { _, _ = decodeMessage(d) },
	func(t *testing.T, d []byte) { _, _ = decodeMessages(d) },
	func(t *testing.T, d []byte) { _, _ = decodeFile(d) },
	func(t *testing.T, d []byte) { _, _, _ = decodeChat(d) },
	func(t *testing.T, d []byte) { _, _ = decodeSupergroupIsForum(d) },
	func(t *testing.T, d []byte) { _, _ = decodeUser(d) },
	func(t *testing.T, d []byte) { _, _ = decodeForumTopic(tg.ChatID(-1002123456789), d) },
	func(t *testing.T, d []byte) { _, _ = decodeForumTopics(tg.ChatID(-1002123456789), d) },
	func(t *testing.T, d []byte) { _, _ = decodeForumTopicInfo(d) },
	func(t *testing.T, d []byte) { _, _ = decodeOptionValue(d) },
	func(t *testing.T, d []byte) {
		if err := decodeError(d); err == nil {
			t.Fatal("decodeError returned no error")
		}
	},
}

// FuzzDecode feeds arbitrary bytes, seeded with the recorded TDLib
// objects of testdata, to every decoder: none may panic, whatever TDLib
// (or a corrupted buffer) hands over.
func FuzzDecode(f *testing.F) {
	fixtures, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	if err != nil || len(fixtures) == 0 {
		f.Fatalf("no fixtures: %v", err)
	}
	for _, p := range fixtures {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		for i := range fuzzDecoders {
			f.Add(uint8(i), data)
		}
	}
	f.Add(uint8(0), []byte(`{"@type":"updateNewMessage","message":null}`))
	f.Add(uint8(1), []byte(`{"@type":"message","id":"9223372036854775807","chat_id":"-1","content":{"@type":"messageDocument"}}`))
	f.Add(uint8(3), []byte(`{"@type":"file","id":1,"size":-1,"local":null,"remote":null}`))
	f.Fuzz(func(t *testing.T, sel uint8, data []byte) {
		fuzzDecoders[int(sel)%len(fuzzDecoders)](t, data)
	})
}
