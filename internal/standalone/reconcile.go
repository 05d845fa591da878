package standalone

import (
	"context"
	"crypto/x509"
	"fmt"
	"os"
	"time"

	"github.com/actgate/actgate/internal/fileutil"
	"github.com/actgate/actgate/internal/journal"
	"github.com/actgate/actgate/internal/metrics"
	"github.com/actgate/actgate/internal/receipt"
	"github.com/actgate/actgate/internal/reconcile"
)

// ReceiptCodeReconciled is the code of the receipt that records a dispatch settled by
// authenticated reconciliation (decision "outcome", state EXECUTED or FAILED).
const ReceiptCodeReconciled = "RECONCILED"

// reconcileEndpoint is one server's reconciliation endpoint and where its credentials are read.
type reconcileEndpoint struct {
	server            string
	url               string
	tokenFile, macKey string
	roots             *x509.CertPool
}

// newSettler builds the gate's reconciler of INDETERMINATE dispatches from the servers'
// reconciliation endpoints (upstreams[].reconciliation), or returns nil when no server has one:
// such dispatches then stay INDETERMINATE, refused to every retry. The credential files are
// checked here and read again for every query, so they can be rotated in place.
func (rt *Runtime) newSettler() (*reconcile.Settler, error) {
	eps := map[string]reconcileEndpoint{} // by the server's URL: a journal record's Upstream
	for _, srv := range rt.cfg.Policy.Servers {
		r := rt.cfg.Upstream(srv.Name).Reconciliation
		if r == nil {
			continue
		}
		e := reconcileEndpoint{server: srv.Name, url: rt.cfg.ReconciliationURL(srv.Name), tokenFile: r.BearerTokenFile, macKey: r.MACKeyFile}
		if _, err := e.endpoint(); err != nil {
			return nil, fmt.Errorf("upstreams[%s].reconciliation: %w", srv.Name, err)
		}
		if r.CAFile != "" {
			var err error
			if e.roots, err = fileutil.ReadCertPool(r.CAFile, false); err != nil {
				return nil, fmt.Errorf("upstreams[%s].reconciliation.caFile: %w", srv.Name, err)
			}
		}
		eps[srv.URL] = e
	}
	if len(eps) == 0 {
		return nil, nil
	}
	results, err := metrics.NewReconciliation(rt.metrics)
	if err != nil {
		return nil, err
	}
	log := rt.log.WithName("reconcile")
	return &reconcile.Settler{
		Journal: rt.store, Agent: rt.cfg.Agent.Name, SinkID: rt.cfg.SinkID, Log: log, Observe: results.Observe,
		Endpoint: func(upstream string) (string, reconcile.Endpoint, bool) {
			e, ok := eps[upstream]
			if !ok {
				return "", reconcile.Endpoint{}, false
			}
			ep, err := e.endpoint()
			if err != nil {
				log.Error(err, "Reconciliation credentials unreadable", "server", e.server)
				return "", reconcile.Endpoint{}, false
			}
			return e.server, ep, true
		},
		Settled: func(rec journal.DispatchRecord, _ reconcile.Verdict) {
			r := receipt.OutcomeOf(rec, eps[rec.Upstream].server, time.Now())
			r.Code = ReceiptCodeReconciled
			if _, err := rt.receipts.Append(r); err != nil {
				log.Error(err, "Receipt append failed", "operation", rec.OperationID)
			}
		},
	}, nil
}

// endpoint reads the endpoint's credentials.
func (e reconcileEndpoint) endpoint() (reconcile.Endpoint, error) {
	tok, err := fileutil.ReadToken(e.tokenFile)
	if err != nil {
		return reconcile.Endpoint{}, fmt.Errorf("bearerTokenFile: %w", err)
	}
	mac, err := os.ReadFile(e.macKey)
	if err != nil {
		return reconcile.Endpoint{}, fmt.Errorf("macKeyFile: %w", err)
	}
	if len(mac) < reconcile.MinMACKeyBytes {
		return reconcile.Endpoint{}, fmt.Errorf("macKeyFile %s: %d bytes, at least %d required", e.macKey, len(mac), reconcile.MinMACKeyBytes)
	}
	return reconcile.Endpoint{URL: e.url, Token: tok, MACKey: mac, RootCAs: e.roots}, nil
}

// runSettler settles INDETERMINATE dispatches every reconciliation.interval until ctx ends.
func (rt *Runtime) runSettler(ctx context.Context) {
	if rt.settler != nil {
		rt.settler.Run(ctx, rt.cfg.ReconcileInterval())
	}
}
