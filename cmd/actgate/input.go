package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/actgate/actgate/internal/envelope"
	"github.com/actgate/actgate/internal/jcs"
)

// readAll reads r up to maxInput bytes.
func readAll(r io.Reader, what string) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxInput+1))
	if err != nil {
		return nil, usageError("cannot read %s: %v", what, err)
	}
	if len(b) > maxInput {
		return nil, fail(exitRejected, fmt.Sprintf("INPUT_TOO_LARGE $: %s exceeds %d bytes", what, maxInput))
	}
	return b, nil
}

// readFile reads the file named by a flag; a missing or unreadable file is a usage error.
func readFile(path, flag string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, usageError("--%s: %v", flag, err)
	}
	defer f.Close()
	return readAll(f, "--"+flag+" "+path)
}

// problemLines formats every problem as "CODE path: message", suffixed with where the
// document came from when that is not stdin.
func problemLines(err error, source string) []string {
	ps := envelope.ProblemsOf(err)
	if len(ps) == 0 {
		return []string{jcsLine(err)}
	}
	lines := make([]string, len(ps))
	for i, p := range ps {
		lines[i] = p.String()
		if source != "" {
			lines[i] += " (in " + source + ")"
		}
	}
	return lines
}

// jcsLine formats a rejection by internal/jcs (or anything wrapping one) as one line
// beginning with its code.
func jcsLine(err error) string {
	var je *jcs.Error
	if errors.As(err, &je) {
		return fmt.Sprintf("%s $: byte offset %d: %s", je.Code, je.Offset, je.Detail)
	}
	return err.Error()
}
