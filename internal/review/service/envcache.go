package service

import (
	"crypto/sha256"
	"sync"

	"github.com/actgate/actgate/internal/envelope"
)

// maxParsedEnvelopes bounds the parsed envelopes an envelopeCache keeps; when it is full it
// starts over empty.
const maxParsedEnvelopes = 4096

// envelopeCache keeps the envelopes of binding moments parsed, by the SHA-256 of their bytes:
// the same bytes parse to the same envelope (an Envelope is immutable), so a review that reads
// its session's moments does not parse and canonicalize each of them again. A hit is checked
// against the moment's recorded digest exactly as a fresh parse is (listGroups).
type envelopeCache struct {
	mu     sync.Mutex
	parsed map[[sha256.Size]byte]*envelope.Envelope
}

func newEnvelopeCache() *envelopeCache {
	return &envelopeCache{parsed: map[[sha256.Size]byte]*envelope.Envelope{}}
}

// parse is envelope.Parse of raw, from the cache when raw was parsed before. Bytes that do not
// parse are not kept.
func (c *envelopeCache) parse(raw string) (*envelope.Envelope, error) {
	key := sha256.Sum256([]byte(raw))
	c.mu.Lock()
	env := c.parsed[key]
	c.mu.Unlock()
	if env != nil {
		return env, nil
	}
	env, err := envelope.Parse([]byte(raw))
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if len(c.parsed) >= maxParsedEnvelopes {
		clear(c.parsed)
	}
	c.parsed[key] = env
	c.mu.Unlock()
	return env, nil
}
