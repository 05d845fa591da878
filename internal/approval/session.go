package approval

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"sync"
	"time"

	"github.com/actgate/actgate/internal/console"
)

// Cookie names. __Host- makes the browser refuse the cookie unless it is Secure, set by this
// origin itself, with Path=/ and no Domain, so no sibling host can set or read it.
const (
	// SessionCookie names the server-side session (SameSite=Strict).
	SessionCookie = "__Host-actgate-session"
	// LoginCookie binds a pending login's state to the browser that started it (SameSite=Lax:
	// the provider's redirect back is a cross-site navigation).
	LoginCookie = "__Host-actgate-login"
)

// ErrTooManySessions: the session store is full; nobody else can sign in until sessions end.
var ErrTooManySessions = errors.New("the approval service holds as many sessions as it may; try again in a few minutes")

// ErrTooManyLogins: the pending-login store is full.
var ErrTooManyLogins = errors.New("too many sign-ins are under way; try again in a minute")

// newID returns a fresh random identifier (parseID's form).
func newID() string {
	var b [randomIDBytes]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// session is one signed-in person: their verified ID token and what the service derived from it.
type session struct {
	id   string
	csrf string
	// idToken is the raw ID token, the bearer token of every API request made for the person.
	idToken string
	// username is the person's user name as the API server maps it (SelfSubjectReview).
	username string
	// issuer, subject and authTime are the token's iss, sub and auth_time (zero when absent).
	issuer, subject string
	authTime        time.Time
	expires         time.Time
	// backend lists and resolves as the person (Backends.For).
	backend console.Backend
}

// checkCSRF reports whether tok is the session's anti-CSRF token.
func (s *session) checkCSRF(tok string) bool {
	return subtle.ConstantTimeCompare([]byte(tok), []byte(s.csrf)) == 1
}

// sessions is the bounded server-side session store.
type sessions struct {
	mu  sync.Mutex
	m   map[string]*session
	max int
}

func newSessions(limit int) *sessions { return &sessions{m: map[string]*session{}, max: limit} }

// add stores s under a fresh id, first dropping expired sessions when the store is full; a
// store still full refuses with ErrTooManySessions.
func (st *sessions) add(s *session, now time.Time) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.m) >= st.max {
		for id, o := range st.m {
			if !now.Before(o.expires) {
				delete(st.m, id)
			}
		}
	}
	if len(st.m) >= st.max {
		return ErrTooManySessions
	}
	s.id, s.csrf = newID(), newID()
	st.m[s.id] = s
	return nil
}

// get returns the live session named id; an expired one is removed.
func (st *sessions) get(id string, now time.Time) *session {
	if _, err := parseID(id); err != nil {
		return nil
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	s := st.m[id]
	if s == nil {
		return nil
	}
	if !now.Before(s.expires) {
		delete(st.m, id)
		return nil
	}
	return s
}

// remove ends session id on the server: its cookie names nothing from now on.
func (st *sessions) remove(id string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	delete(st.m, id)
}

// count is the number of sessions held.
func (st *sessions) count() int {
	st.mu.Lock()
	defer st.mu.Unlock()
	return len(st.m)
}

// pending is a sign-in under way: what the callback must find again.
type pending struct {
	state, nonce, verifier string
	// moment is the deep link's NAMESPACE/NAME to return to ("" for the list).
	moment string
	// maxAge, when positive, is the max_age asked for (step-up): the ID token's auth_time must
	// be no older.
	maxAge  time.Duration
	expires time.Time
}

// logins is the bounded store of pending logins.
type logins struct {
	mu  sync.Mutex
	m   map[string]*pending
	max int
}

func newLogins(limit int) *logins { return &logins{m: map[string]*pending{}, max: limit} }

// add stores p under a fresh state; a store full of unexpired logins refuses with
// ErrTooManyLogins.
func (l *logins) add(p *pending, now time.Time) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.m) >= l.max {
		for k, o := range l.m {
			if !now.Before(o.expires) {
				delete(l.m, k)
			}
		}
	}
	if len(l.m) >= l.max {
		return ErrTooManyLogins
	}
	p.state, p.nonce, p.verifier = newID(), newID(), newID()
	l.m[p.state] = p
	return nil
}

// take removes and returns the unexpired login of state: a state is used once.
func (l *logins) take(state string, now time.Time) *pending {
	if _, err := parseID(state); err != nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	p := l.m[state]
	delete(l.m, state)
	if p == nil || !now.Before(p.expires) {
		return nil
	}
	return p
}
