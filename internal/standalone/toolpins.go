package standalone

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/actgate/actgate/internal/fileutil"
	"github.com/actgate/actgate/internal/sink"
	"github.com/actgate/actgate/internal/tooldef"
)

// ToolPinsFile is the file in the data dir holding the tool definition digests recorded on
// first use or accepted by an operator, and the changed definitions awaiting acceptance
// (docs/api.md "Pinned tool definitions"). The gate and `actgate tools accept` both write it,
// each under an exclusive lock of ToolPinsLockFile, replacing it atomically.
const (
	ToolPinsFile     = "tool-pins.json"
	ToolPinsLockFile = "tool-pins.lock"
)

// MaxToolPins bounds the pins and the pending changes the file holds (each).
const MaxToolPins = 4096

// maxToolPinsBytes bounds the file the gate reads.
const maxToolPinsBytes = 8 << 20

// ToolPinDoc is the content of ToolPinsFile.
type ToolPinDoc struct {
	// Pins are the accepted digests, one per server and tool.
	Pins []ToolPinEntry `json:"pins"`
	// Pending are the changed definitions the gate saw listed, one per server and tool: what
	// `actgate tools accept` accepts.
	Pending []ToolPinEntry `json:"pending"`
}

// ToolPinEntry is one server's tool and a definition digest.
type ToolPinEntry struct {
	Server     string            `json:"server"`
	Tool       string            `json:"tool"`
	SHA256     string            `json:"sha256"`
	Members    map[string]string `json:"members,omitempty"`
	AcceptedBy string            `json:"acceptedBy,omitempty"`
	Time       time.Time         `json:"time"`
}

// ParseToolPins parses and checks ToolPinsFile's content: unknown members, a digest that is not
// 64 lowercase hex digits, an empty server or tool, a member that tooldef does not digest, two
// entries for one server and tool, or more than MaxToolPins entries are refused.
func ParseToolPins(b []byte) (*ToolPinDoc, error) {
	if len(b) > maxToolPinsBytes {
		return nil, fmt.Errorf("%s: larger than %d bytes", ToolPinsFile, maxToolPinsBytes)
	}
	var d ToolPinDoc
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		return nil, fmt.Errorf("%s: %w", ToolPinsFile, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%s: content after the document", ToolPinsFile)
	}
	for _, list := range []struct {
		name    string
		entries []ToolPinEntry
	}{{"pins", d.Pins}, {"pending", d.Pending}} {
		if len(list.entries) > MaxToolPins {
			return nil, fmt.Errorf("%s: more than %d %s", ToolPinsFile, MaxToolPins, list.name)
		}
		seen := map[[2]string]bool{}
		for i, e := range list.entries {
			if err := e.check(); err != nil {
				return nil, fmt.Errorf("%s: %s[%d]: %w", ToolPinsFile, list.name, i, err)
			}
			k := [2]string{e.Server, e.Tool}
			if seen[k] {
				return nil, fmt.Errorf("%s: %s[%d]: a second entry for server %q tool %q", ToolPinsFile, list.name, i, e.Server, e.Tool)
			}
			seen[k] = true
		}
	}
	return &d, nil
}

func (e ToolPinEntry) check() error {
	switch {
	case e.Server == "" || len(e.Server) > 63:
		return errors.New("server must be 1-63 characters")
	case e.Tool == "" || len(e.Tool) > 1024:
		return errors.New("tool must be 1-1024 characters")
	case !tooldef.IsDigest(e.SHA256):
		return errors.New("sha256 must be 64 lowercase hex digits")
	case len(e.AcceptedBy) > 253:
		return errors.New("acceptedBy is longer than 253 characters")
	}
	known := map[string]bool{}
	for _, m := range tooldef.Members {
		known[m] = true
	}
	for m, v := range e.Members {
		if !known[m] || !tooldef.IsDigest(v) {
			return fmt.Errorf("members: %q is not a definition member with a digest", m)
		}
	}
	return nil
}

// ToolPins is ToolPinsFile of a data dir: the standalone gate's sink.PinStore. Reads are served
// from memory while the file's size and modification time stay the same.
type ToolPins struct {
	dir string
	now func() time.Time

	mu    sync.Mutex
	doc   *ToolPinDoc
	stamp fileStamp
}

type fileStamp struct {
	fi fs.FileInfo
}

// same reports whether fi is the file last read: the same inode (the file is replaced, never
// written in place), size and modification time.
func (s fileStamp) same(fi fs.FileInfo) bool {
	return s.fi != nil && os.SameFile(s.fi, fi) && s.fi.Size() == fi.Size() && s.fi.ModTime().Equal(fi.ModTime())
}

// OpenToolPins returns the pin store of the data dir dir.
func OpenToolPins(dir string) *ToolPins { return &ToolPins{dir: dir, now: time.Now} }

var _ sink.PinStore = (*ToolPins)(nil)

func (p *ToolPins) path() string { return filepath.Join(p.dir, ToolPinsFile) }

// load returns the file's document, rereading it when it changed. A missing file is empty.
func (p *ToolPins) load() (*ToolPinDoc, error) {
	fi, err := os.Stat(p.path())
	if errors.Is(err, fs.ErrNotExist) {
		p.doc, p.stamp = &ToolPinDoc{}, fileStamp{}
		return p.doc, nil
	}
	if err != nil {
		return nil, err
	}
	if p.doc != nil && p.stamp.same(fi) {
		return p.doc, nil
	}
	b, err := ReadPrivate(p.path())
	if err != nil {
		return nil, err
	}
	d, err := ParseToolPins(b)
	if err != nil {
		return nil, err
	}
	p.doc, p.stamp = d, fileStamp{fi: fi}
	return d, nil
}

// update runs f on the current document under the lock file and writes the result.
func (p *ToolPins) update(f func(d *ToolPinDoc) error) error {
	lf, err := os.OpenFile(filepath.Join(p.dir, ToolPinsLockFile), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	defer func() { _ = lf.Close() }()
	if err := lockPins(lf); err != nil {
		return err
	}
	p.doc = nil // reread under the lock: another process may have written
	d, err := p.load()
	if err != nil {
		return err
	}
	next := &ToolPinDoc{Pins: append([]ToolPinEntry(nil), d.Pins...), Pending: append([]ToolPinEntry(nil), d.Pending...)}
	if err := f(next); err != nil {
		return err
	}
	sortEntries(next.Pins)
	sortEntries(next.Pending)
	b, err := json.MarshalIndent(next, "", "  ")
	if err != nil {
		return err
	}
	if err := fileutil.WriteAtomic(p.path(), append(b, '\n'), 0o600); err != nil {
		return err
	}
	p.doc = nil
	return nil
}

func sortEntries(es []ToolPinEntry) {
	sort.Slice(es, func(i, j int) bool {
		if es[i].Server != es[j].Server {
			return es[i].Server < es[j].Server
		}
		return es[i].Tool < es[j].Tool
	})
}

func find(es []ToolPinEntry, server, tool string) int {
	for i, e := range es {
		if e.Server == server && e.Tool == tool {
			return i
		}
	}
	return -1
}

// Doc returns a copy of the current document.
func (p *ToolPins) Doc() (ToolPinDoc, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	d, err := p.load()
	if err != nil {
		return ToolPinDoc{}, err
	}
	return ToolPinDoc{Pins: append([]ToolPinEntry(nil), d.Pins...), Pending: append([]ToolPinEntry(nil), d.Pending...)}, nil
}

// Pinned returns the digest recorded for tool on server (sink.PinStore).
func (p *ToolPins) Pinned(_ context.Context, server, tool string) (sink.PinRecord, bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	d, err := p.load()
	if err != nil {
		return sink.PinRecord{}, false, err
	}
	if i := find(d.Pins, server, tool); i >= 0 {
		return d.Pins[i].record(), true, nil
	}
	return sink.PinRecord{}, false, nil
}

// RecordFirstUse stores r unless a digest is recorded for its server and tool (sink.PinStore).
func (p *ToolPins) RecordFirstUse(_ context.Context, r sink.PinRecord) (sink.PinRecord, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out sink.PinRecord
	err := p.update(func(d *ToolPinDoc) error {
		if i := find(d.Pins, r.Server, r.Tool); i >= 0 {
			out = d.Pins[i].record()
			return nil
		}
		if len(d.Pins) >= MaxToolPins {
			return fmt.Errorf("%s holds %d pins, its bound", ToolPinsFile, MaxToolPins)
		}
		e := entryOf(r)
		d.Pins = append(d.Pins, e)
		out = e.record()
		return nil
	})
	return out, err
}

// RecordChange stores r as the changed definition of its server and tool awaiting acceptance
// (sink.ChangeRecorder), replacing an earlier one.
func (p *ToolPins) RecordChange(_ context.Context, r sink.PinRecord) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.update(func(d *ToolPinDoc) error {
		e := entryOf(r)
		if i := find(d.Pending, r.Server, r.Tool); i >= 0 {
			d.Pending[i] = e
			return nil
		}
		if len(d.Pending) >= MaxToolPins {
			return fmt.Errorf("%s holds %d pending changes, its bound", ToolPinsFile, MaxToolPins)
		}
		d.Pending = append(d.Pending, e)
		return nil
	})
}

// ErrNoPendingChange is Accept's refusal when no changed definition of the tool awaits
// acceptance and no digest is given.
var ErrNoPendingChange = errors.New("no changed definition of this tool awaits acceptance")

// ErrDigestNotPending is Accept's refusal of a digest that is not the pending change's.
var ErrDigestNotPending = errors.New("the digest given is not the changed definition the gate saw listed")

// Accept accepts the changed definition of tool on server that the gate saw listed (pending),
// or, when digest is given, exactly that digest (which must be the pending one when a change
// is pending), recording by as who accepted it. It returns the accepted entry.
func (p *ToolPins) Accept(server, tool, digest, by string) (ToolPinEntry, error) {
	if digest != "" && !tooldef.IsDigest(digest) {
		return ToolPinEntry{}, errors.New("the digest must be 64 lowercase hex digits")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var out ToolPinEntry
	err := p.update(func(d *ToolPinDoc) error {
		i := find(d.Pending, server, tool)
		switch {
		case i < 0 && digest == "":
			return ErrNoPendingChange
		case i >= 0 && digest != "" && d.Pending[i].SHA256 != digest:
			return fmt.Errorf("%w (pending %s)", ErrDigestNotPending, d.Pending[i].SHA256)
		}
		out = ToolPinEntry{Server: server, Tool: tool, SHA256: digest}
		if i >= 0 {
			out = d.Pending[i]
			d.Pending = append(d.Pending[:i], d.Pending[i+1:]...)
		}
		out.AcceptedBy, out.Time = by, p.now().UTC()
		if j := find(d.Pins, server, tool); j >= 0 {
			d.Pins[j] = out
			return nil
		}
		if len(d.Pins) >= MaxToolPins {
			return fmt.Errorf("%s holds %d pins, its bound", ToolPinsFile, MaxToolPins)
		}
		d.Pins = append(d.Pins, out)
		return nil
	})
	return out, err
}

func entryOf(r sink.PinRecord) ToolPinEntry {
	return ToolPinEntry{Server: r.Server, Tool: r.Tool, SHA256: r.Digest, Members: r.Members, AcceptedBy: r.AcceptedBy, Time: r.AcceptedAt.UTC()}
}

func (e ToolPinEntry) record() sink.PinRecord {
	return sink.PinRecord{Server: e.Server, Tool: e.Tool, Digest: e.SHA256, Members: e.Members, AcceptedBy: e.AcceptedBy, AcceptedAt: e.Time}
}
