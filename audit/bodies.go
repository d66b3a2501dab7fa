package audit

import (
	"fmt"
	"path"
)

// The bodies an audit log's entries hash, and where a run directory keeps them (relative to
// it). A gateway entry carries request_sha256 and response_sha256; its bodies are kept whole,
// gzip-compressed, and the hash is of the uncompressed bytes. A call entry carries
// output_sha256 of everything the call printed; its log keeps the output whole up to the
// runner's log cap, and past it the entry says so (log_truncated) and carries log_bytes and
// log_sha256 of exactly what the log keeps.
const (
	GatewayDir   = "gateway"
	CallsDir     = "calls"
	TerminalDir  = "terminal"
	BodyRequest  = "request"
	BodyResponse = "response"
)

// GatewayBodyName is the file name of gateway request n's body (part BodyRequest or
// BodyResponse) inside GatewayDir.
func GatewayBodyName(n int, part string) string {
	if part == BodyRequest {
		return fmt.Sprintf("%06d.request.json.gz", n)
	}
	return fmt.Sprintf("%06d.response.gz", n)
}

// GatewayBodyPath is the body's path relative to the run directory.
func GatewayBodyPath(n int, part string) string {
	return path.Join(GatewayDir, GatewayBodyName(n, part))
}

// CallLogPath is compute call n's output log, relative to the run directory.
func CallLogPath(n int) string { return path.Join(CallsDir, fmt.Sprintf("%d.log", n)) }

// TerminalSegmentPath is segment n of a human run's terminal recording (asciicast v2 lines,
// gzip-compressed), relative to the run directory.
func TerminalSegmentPath(n int) string {
	return path.Join(TerminalDir, fmt.Sprintf("%06d.cast.gz", n))
}
