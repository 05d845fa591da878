package standalone

import (
	"context"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/actgate/actgate/internal/gateconfig"
	"github.com/actgate/actgate/internal/notify"
	"github.com/actgate/actgate/internal/sink"
)

// notifierStopTimeout bounds how long shutdown waits for queued announcements.
const notifierStopTimeout = 5 * time.Second

// startNotifier starts the announcer of the config's notifications section (internal/notify);
// nil when the file configures none. Its counter goes on reg (nil: not registered).
func startNotifier(ctx context.Context, cfg *gateconfig.Config, log logr.Logger, reg prometheus.Registerer) (*notify.Notifier, error) {
	opts, ok := cfg.NotifierOptions()
	if !ok {
		return nil, nil
	}
	opts.Log, opts.Registerer = log.WithName("notify"), reg
	n, err := notify.New(opts)
	if err != nil {
		return nil, err
	}
	n.Start(context.WithoutCancel(ctx))
	return n, nil
}

// observer is n as a sink.Observer: a nil interface (not a typed nil) when n is nil, so
// sink.Observers skips it.
func observer(n *notify.Notifier) sink.Observer {
	if n == nil {
		return nil
	}
	return n
}

// stopNotifier delivers what is queued, up to notifierStopTimeout.
func stopNotifier(n *notify.Notifier, log logr.Logger) {
	if n == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), notifierStopTimeout)
	defer cancel()
	if err := n.Stop(ctx); err != nil {
		log.Info("Announcements abandoned at shutdown", "error", err.Error())
	}
}
