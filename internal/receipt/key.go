package receipt

import (
	"bytes"
	"fmt"
	"os"

	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/actgate/actgate/internal/authority"
	"github.com/actgate/actgate/internal/fileutil"
)

// LoadOrCreateSigner loads the Ed25519 key at keyPath that signs a log's checkpoints, creating
// it (mode 0600) on first use and refusing a key file group or others can read, and writes its
// public key to pubPath (PEM, mode 0644) for `actgate receipts verify --key` when that file is
// missing or differs. The standalone gate keeps both in its data directory, a sidecar in its
// journal directory.
func LoadOrCreateSigner(keyPath, pubPath string) (signature.SignerVerifier, error) {
	key, err := authority.LoadOrCreateKey(keyPath)
	if err != nil {
		return nil, err
	}
	pem, err := cryptoutils.MarshalPublicKeyToPEM(key.PublicKey())
	if err != nil {
		return nil, err
	}
	if old, err := os.ReadFile(pubPath); err != nil || !bytes.Equal(old, pem) {
		if err := fileutil.WriteAtomic(pubPath, pem, 0o644); err != nil {
			return nil, fmt.Errorf("receipt public key %s: %w", pubPath, err)
		}
	}
	return key.SignerVerifier(), nil
}
