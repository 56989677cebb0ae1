package serve

import "errors"

// ErrBadOption is wrapped by the errors of NewLambdaHandler and
// OptionsFromEnv for a value they do not know: a mode, an auth mode, a
// duration.
var ErrBadOption = errors.New("serve: bad option")

// ErrNoIAMCaller is the error of a request without an IAM signer when the
// function expects one (AuthIAM).
var ErrNoIAMCaller = errors.New("no IAM caller in the request context (is the Function URL's AuthType AWS_IAM?)")
