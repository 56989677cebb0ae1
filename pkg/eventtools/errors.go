package eventtools

import "errors"

// errBadArgs reports a tool call whose arguments are invalid: the tool
// answers it as an isError result naming what is wrong.
var errBadArgs = errors.New("invalid arguments")
