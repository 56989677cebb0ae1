package dynamostore

import "errors"

// errCorrupt reports registry items that do not decode (decodeItems): a
// record this package did not write.
var errCorrupt = errors.New("corrupt registry items")

// errTooManyRaces is returned when a call lost too many races in a row.
var errTooManyRaces = errors.New("too many concurrent writers; giving up")
