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
	rd.msgs[APIChat] = map[string]msg{`{"role":"user","content":"hi"}`: {role: "user"}, `[1]`: {}}
	f.Add([]byte(`{"messages":[{"role":"user","content":"hi"},[1],{"role":"user","content":"hi"}],"tools":[]}`))
	f.Add([]byte(`{"messages":[{"role":"user","content":"hi"}x,[1]]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		other := make([]json.RawMessage, 2)
		msgs, ok := rd.requestMembers(APIChat, body, "messages", []string{"tools", "functions"}, other)
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

// The same message bytes in two APIs' requests are each read as their API reads them, not as
// the first one read them.
func TestMessagesRememberedPerAPI(t *testing.T) {
	rd := newReader()
	m := `{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"ok"}]}`
	chat, err := rd.readRequest(APIChat, []byte(`{"messages":[`+m+`]}`))
	if err != nil {
		t.Fatal(err)
	}
	anthropic, err := rd.readRequest(APIMessages, []byte(`{"messages":[`+m+`]}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := chat.msgs[0].parts[0].typ; got != PartOther {
		t.Errorf("chat: part %q, want %q", got, PartOther)
	}
	if got := anthropic.msgs[0].parts[0].typ; got != PartToolResult {
		t.Errorf("messages: part %q, want %q", got, PartToolResult)
	}
	again, _ := rd.readRequest(APIChat, []byte(`{"messages":[`+m+`,`+m+`]}`))
	if len(again.msgs) != 2 || again.msgs[1].parts[0].typ != PartOther {
		t.Errorf("chat again: %+v", again.msgs)
	}
}

// stringEndBytewise is stringEnd as a walk byte by byte: the reference FuzzStringEnd holds the
// fast one to.
func stringEndBytewise(data []byte, i int) int {
	for i++; i < len(data); i++ {
		switch data[i] {
		case '"':
			return i + 1
		case '\\':
			i++
		}
	}
	return -1
}

// FuzzStringEnd: stringEnd finds the same end as the byte-by-byte walk, on any bytes and from
// any start (valid JSON or not: requestMembers checks validity apart).
func FuzzStringEnd(f *testing.F) {
	for _, s := range []string{`"abc"`, `"a\"b"`, `"a\\"b"`, `"a\\\"b"`, `"\\\\"`, `"\"`, `"`, `""`, `"\u0022"x"`, `x"\\\\\"\\"`, "\"\xff\\\"\"", `"a\`} {
		f.Add([]byte(s), 0)
	}
	f.Fuzz(func(t *testing.T, data []byte, start int) {
		if len(data) == 0 {
			return
		}
		start = ((start % len(data)) + len(data)) % len(data)
		if got, want := stringEnd(data, start), stringEndBytewise(data, start); got != want {
			t.Fatalf("stringEnd(%q, %d) = %d; the byte-by-byte walk says %d", data, start, got, want)
		}
	})
}
