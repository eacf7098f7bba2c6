//go:build !linux

package hugemem

import "errors"

func advise(addr, n uintptr) error { return errors.ErrUnsupported }
