package service

import (
	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"

	"github.com/actgate/actgate/internal/review/service/kubecache"
)

// Cache serves the reads a review makes to find its caller and its session's binding moments
// from informers (kubecache.Cache); a miss is read from the API server.
type Cache = kubecache.Cache

// NewCache returns a Cache reading through cfg, whose user needs list and watch on
// ToolPolicies cluster-wide and on pods where a ToolPolicy is (PolicyRules,
// NamespacePolicyRules), with the BindingMoment informers indexed by LabelSession and
// LabelEscalation. scheme must hold client-go's types and actgate's v1alpha1. Start it before
// the Service serves.
func NewCache(cfg *rest.Config, scheme *runtime.Scheme, log logr.Logger) (*Cache, error) {
	return kubecache.New(cfg, scheme, log, LabelSession, LabelEscalation)
}
