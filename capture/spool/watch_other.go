//go:build !linux

package spool

import "errors"

// watchDir is not available here: the ingester polls.
func watchDir(string) (<-chan struct{}, func(), error) {
	return nil, nil, errors.ErrUnsupported
}
