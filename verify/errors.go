package verify

// Kind says what stopped a verification (a publication or run that does not check is no error:
// it is a Result that is not Valid).
type Kind int

const (
	// Usage: what the caller gave is not usable (a pattern that is not one, a chain that is not
	// PEM, a flag that needs another).
	Usage Kind = iota
	// IO: a file could not be read.
	IO
)

// Error is what stopped a verification; its message names the thing, the place and the fix.
type Error struct {
	Kind Kind
	Err  error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

func usageErr(err error) error { return &Error{Kind: Usage, Err: err} }
func ioErr(err error) error    { return &Error{Kind: IO, Err: err} }
