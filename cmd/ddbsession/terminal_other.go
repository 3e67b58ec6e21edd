//go:build !linux

package main

import "os"

// isTerminal reports whether stream is an *os.File on a character device
// other than /dev/null, the stdin of cron and of a service manager.
func isTerminal(stream any) bool {
	f, ok := stream.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	if err != nil || st.Mode()&os.ModeCharDevice == 0 {
		return false
	}
	null, err := os.Stat(os.DevNull)
	return err != nil || !os.SameFile(st, null)
}
