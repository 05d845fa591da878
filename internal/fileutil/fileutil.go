// Package fileutil holds small file helpers shared by actgate's commands and packages.
package fileutil

import (
	"context"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// WriteAtomic replaces path with data (mode) through a temporary file in the same directory and
// a rename, so that a reader sees the old content or the new, never a part.
func WriteAtomic(path string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// ReadToken reads a token or credential file: its content without surrounding whitespace. An
// empty file is an error (no caller should present an empty bearer token). Callers read it anew
// on each use where the file rotates (projected service-account tokens, mounted Secrets).
func ReadToken(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	t := strings.TrimSpace(string(b))
	if t == "" {
		return "", fmt.Errorf("%s is empty", path)
	}
	return t, nil
}

// CredentialTTL is how long a TokenSource presents a credential it read before it reads the
// file again: a rotated credential (a kubelet swapping a mounted Secret's file, an operator
// replacing a file in place) applies within it, and a hot-path call does not open and read the
// file (four system calls) every time.
const CredentialTTL = time.Second

// TokenSource returns the token in path (ReadToken), read again once ttl has passed since the
// last read (on the monotonic clock). A failed read is returned and not kept: the next call reads
// the file again.
func TokenSource(path string, ttl time.Duration) func(context.Context) (string, error) {
	var mu sync.Mutex
	var token string
	var read time.Time
	return func(context.Context) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		if token != "" && time.Since(read) < ttl {
			return token, nil
		}
		t, err := ReadToken(path)
		if err != nil {
			token = ""
			return "", err
		}
		token, read = t, time.Now()
		return t, nil
	}
}

// ReadCertPool reads a PEM bundle of CA certificates into a pool, on top of the system roots
// when withSystem (and they can be loaded). A file without any certificate is an error, not an
// empty pool that would refuse every peer.
func ReadCertPool(path string, withSystem bool) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if withSystem {
		if sys, err := x509.SystemCertPool(); err == nil {
			pool = sys
		}
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no PEM certificate", path)
	}
	return pool, nil
}
