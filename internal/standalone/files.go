package standalone

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/actgate/actgate/internal/gateconfig"
	"github.com/actgate/actgate/internal/receipt"
)

// ensurePrivateDir creates dir (mode 0700) if missing and refuses one that group or others
// can write.
func ensurePrivateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("%s has mode %v: it must not be writable by group or others (chmod 700)", dir, fi.Mode().Perm())
	}
	return nil
}

// loadReceiptKey loads (creating on first start) the key that signs receipt checkpoints, and
// writes its public key beside it for `actgate receipts verify --key`.
func loadReceiptKey(cfg *gateconfig.Config) (signature.SignerVerifier, error) {
	return receipt.LoadOrCreateSigner(cfg.Path(gateconfig.ReceiptKeyFile), cfg.Path(gateconfig.ReceiptPubFile))
}

// loadOrCreateSecret returns the n random bytes stored at path, creating the file (mode 0600)
// on first use. A file readable by group or others is refused.
func loadOrCreateSecret(path string, n int) ([]byte, error) {
	b, err := ReadPrivate(path)
	if err == nil {
		if len(b) != n {
			return nil, fmt.Errorf("%s: want %d bytes, found %d", path, n, len(b))
		}
		return b, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	b = make([]byte, n)
	_, _ = rand.Read(b)
	if err := createExclusive(path, b); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return loadOrCreateSecret(path, n)
		}
		return nil, err
	}
	return b, nil
}

// loadOrCreateToken returns a principal's token (64 hex characters), creating it on first use.
func loadOrCreateToken(path string) ([]byte, error) {
	b, err := ReadPrivate(path)
	if err == nil {
		tok := bytes.TrimSpace(b)
		if len(tok) < 32 {
			return nil, fmt.Errorf("%s: token too short", path)
		}
		return tok, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	var r [32]byte
	_, _ = rand.Read(r[:])
	tok := []byte(hex.EncodeToString(r[:]))
	if err := createExclusive(path, append(tok, '\n')); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return loadOrCreateToken(path)
		}
		return nil, err
	}
	return tok, nil
}

// ReadPrivate reads a file that must not be accessible to group or others.
func ReadPrivate(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%s has mode %v: it must not be accessible to group or others (chmod 600)", path, fi.Mode().Perm())
	}
	return os.ReadFile(path)
}

// createExclusive writes a new file with mode 0600, failing with fs.ErrExist if it exists.
func createExclusive(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(path)
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(path)
		return err
	}
	return f.Close()
}
