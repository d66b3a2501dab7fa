package transcript

import (
	"encoding/json"
	"reflect"
	"testing"
)

// FuzzRequestMembers: where the walk reads a request, it reads what encoding/json's decode into
// raw members reads; where that decode refuses a body, the walk does not read it.
func FuzzRequestMembers(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"text","text":"a\"]}"}]}],"tools":[{"type":"function","function":{"name":"bash"}}]}`,
		`{"messages":null,"tools":null}`,
		`{"messages":[],"functions":[1, 2 ,3]}`,
		`{"Messages":[1],"MESSAGES":[2,3],"TOOLS":{"a":[]}}`,
		`{"messages":{}}`,
		`{"messages":"x"}`,
		`{"messages":[1,2}`,
		`[1]`,
		` { "messages" : [ true , false , null , -1.5e3 , "\u0022]" ] , "\u0074ools" : "t" } `,
		`{"messages":[{"role":"user"}]} trailing`,
		`{}`,
	} {
		f.Add([]byte(s))
	}
	rd := newReader()
	// Messages read before, as a scaffold resends them (the walk takes them as valid).
	rd.msgs[`{"role":"user","content":"hi"}`] = msg{role: "user"}
	rd.msgs[`[1]`] = msg{}
	f.Add([]byte(`{"messages":[{"role":"user","content":"hi"},[1],{"role":"user","content":"hi"}],"tools":[]}`))
	f.Add([]byte(`{"messages":[{"role":"user","content":"hi"}x,[1]]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		other := make([]json.RawMessage, 2)
		msgs, ok := rd.requestMembers(body, "messages", []string{"tools", "functions"}, other)
		var want struct {
			Messages  []json.RawMessage `json:"messages"`
			Tools     json.RawMessage   `json:"tools"`
			Functions json.RawMessage   `json:"functions"`
		}
		err := json.Unmarshal(body, &want)
		if !ok {
			return
		}
		if err != nil {
			t.Fatalf("walked a body the decode refuses (%v)", err)
		}
		if len(msgs) != len(want.Messages) || (msgs == nil) != (want.Messages == nil) {
			t.Fatalf("messages: %q, want %q", msgs, want.Messages)
		}
		for i := range msgs {
			if string(msgs[i]) != string(want.Messages[i]) {
				t.Fatalf("message %d: %q, want %q", i, msgs[i], want.Messages[i])
			}
		}
		if !reflect.DeepEqual([]string{string(other[0]), string(other[1])}, []string{string(want.Tools), string(want.Functions)}) {
			t.Fatalf("members: %q, want %q %q", other, want.Tools, want.Functions)
		}
	})
}
