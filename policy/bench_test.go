package policy

import "testing"

// BenchmarkParse: parse, validate and hash a full track (what every run start and verify does).
func BenchmarkParse(b *testing.B) {
	data := []byte(base)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := Parse("t.toml", data); err != nil {
			b.Fatal(err)
		}
	}
}
