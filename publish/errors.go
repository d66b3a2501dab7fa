package publish

// Kind says whose an Error is.
type Kind int

const (
	// Usage: what the caller gave cannot be published (a missing key, an existing directory).
	Usage Kind = iota
	// IO: a file could not be read or written.
	IO
	// Invalid: the inputs or the publication do not check (an attestation that does not
	// verify, a run the ledgers do not account for, a file edited).
	Invalid
)

// Error is every error of Write and Verify; its message names the thing, the place and the fix.
type Error struct {
	Kind Kind
	Err  error
	// Listed: the problems were written one per line already (the message only counts them).
	Listed bool
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

func usageErr(err error) error { return &Error{Kind: Usage, Err: err} }
func ioErr(err error) error    { return &Error{Kind: IO, Err: err} }
