package kubectlplugin

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/term"

	"github.com/actgate/actgate/internal/envelope"
)

// clearScreen moves the cursor home and clears the screen before each redraw.
const clearScreen = "\x1b[H\x1b[2J"

// terminalOf returns the file of r when it is a terminal.
func terminalOf(r io.Reader) (*os.File, bool) {
	f, ok := r.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return nil, false
	}
	return f, true
}

// runPicker drives p from the terminal in (put in raw mode for the duration, and restored on
// every return) and draws p.View to out after every read. It returns what p returns: the chosen
// resolution, or nil when the principal aborted. End of input aborts too.
func runPicker(in *os.File, out io.Writer, p *picker) (*envelope.Resolution, error) {
	fd := int(in.Fd())
	old, err := term.MakeRaw(fd)
	if err != nil {
		return nil, fmt.Errorf("picker: raw mode: %w", err)
	}
	defer func() { _ = term.Restore(fd, old) }()

	// Raw mode turns off output post-processing, so every line needs its own carriage return.
	draw := func() error {
		_, err := io.WriteString(out, clearScreen+strings.ReplaceAll(p.View(), "\n", "\r\n"))
		return err
	}
	if err := draw(); err != nil {
		return nil, fmt.Errorf("picker: %w", err)
	}
	buf := make([]byte, 256)
	var carry []byte
	for {
		n, rerr := in.Read(buf)
		if n > 0 {
			keys, rest := decodeKeys(append(carry, buf[:n]...))
			carry = rest
			for _, k := range keys {
				if done, res := p.Key(k); done {
					return res, nil
				}
			}
			if err := draw(); err != nil {
				return nil, fmt.Errorf("picker: %w", err)
			}
		}
		if errors.Is(rerr, io.EOF) {
			return nil, nil
		}
		if rerr != nil {
			return nil, fmt.Errorf("picker: read: %w", rerr)
		}
	}
}
