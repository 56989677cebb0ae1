package serve

import "errors"

// ErrBadOption is wrapped by the errors of NewLambdaHandler,
// ListenAndServe and OptionsFromEnv for a value they do not know: a mode,
// an auth mode, a duration.
var ErrBadOption = errors.New("serve: bad option")

// badOption is the error of a bad value that package envconfig reports
// (an *envconfig.Error): it matches ErrBadOption (errors.Is) and
// *envconfig.Error (errors.As), and its text is the envconfig error's
// alone, so both mains print a bad value the same way.
type badOption struct{ err error }

func (e badOption) Error() string   { return e.err.Error() }
func (e badOption) Unwrap() []error { return []error{ErrBadOption, e.err} }

// ErrNoIAMCaller is the error of a request without an IAM signer when the
// function expects one (AuthIAM).
var ErrNoIAMCaller = errors.New("no IAM caller in the request context (is the Function URL's AuthType AWS_IAM?)")
