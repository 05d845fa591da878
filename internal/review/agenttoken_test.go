package review

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"testing"

	"github.com/actgate/actgate/internal/agentoauth"
)

// TestClientSendsAgentTokenOnlyToALevelThatVerifiesIt: a review whose context carries the
// agent's verified token sends it in AgentTokenHeader (and a review without one sends none);
// an answer of a service below LevelAgentToken — which would have ignored the header and named
// the pod's service account — is not used (ErrServiceTooOld), one of LevelAgentToken is.
func TestClientSendsAgentTokenOnlyToALevelThatVerifiesIt(t *testing.T) {
	srv, c, set, _ := levelServer(t)
	var mu sync.Mutex
	var got []string
	inner := srv.Config.Handler
	srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Get(AgentTokenHeader))
		mu.Unlock()
		inner.ServeHTTP(w, r)
	})
	withToken := agentoauth.WithToken(context.Background(), "agent-access-token")
	set("1", http.StatusOK, "")
	if _, err := c.Do(withToken, Request{Operation: OperationPermit}); !errors.Is(err, ErrServiceTooOld) || !errors.Is(err, ErrUnavailable) {
		t.Fatalf("a level-1 answer to a review with the agent's token: %v, want ErrServiceTooOld", err)
	}
	if r, err := c.Do(context.Background(), Request{Operation: OperationPermit}); err != nil || !r.Allowed {
		t.Fatalf("a level-1 answer to a review without an agent token: %+v %v", r, err)
	}
	set(strconv.Itoa(LevelAgentToken), http.StatusOK, "")
	if r, err := c.Do(withToken, Request{Operation: OperationPermit}); err != nil || !r.Allowed {
		t.Fatalf("a level-%d answer: %+v %v", LevelAgentToken, r, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 3 || got[0] != "agent-access-token" || got[1] != "" || got[2] != "agent-access-token" {
		t.Fatalf("agent token headers sent: %q", got)
	}
}
