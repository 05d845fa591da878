package standalone

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/actgate/actgate/internal/budget"
)

// The budgets API of `actgate serve` (docs/api.md "Budgets"), authenticated as the moments API
// is (a principal's token):
//
//	GET /v1/budgets   every budget ledger that still counts something: spent, remaining, window end
const APIBudgets = "/v1/budgets"

// BudgetJSON is one budget ledger (a budget's key in its window) on the API.
type BudgetJSON struct {
	Namespace string `json:"namespace"`
	Policy    string `json:"policy"`
	Rule      string `json:"rule"`
	Budget    string `json:"budget"`
	Key       string `json:"key"`
	// Calls and Amount are what counts now; MaxCalls (0: none) and MaxSum ("" : none) the
	// limits; RemainingCalls and RemainingAmount what is left (never negative).
	Calls           int64     `json:"calls"`
	MaxCalls        int64     `json:"maxCalls,omitempty"`
	RemainingCalls  int64     `json:"remainingCalls,omitempty"`
	Amount          string    `json:"amount"`
	MaxSum          string    `json:"maxSum,omitempty"`
	RemainingAmount string    `json:"remainingAmount,omitempty"`
	Unit            string    `json:"unit,omitempty"`
	WindowEnd       time.Time `json:"windowEnd"`
	// Unsettled is how many of the charges are not settled yet (in flight or INDETERMINATE).
	Unsettled int `json:"unsettled"`
}

// BudgetJSONOf renders a ledger at now.
func BudgetJSONOf(u budget.Usage, now time.Time) BudgetJSON {
	n, sum := u.Spent(now)
	out := BudgetJSON{
		Namespace: u.Namespace, Policy: u.Policy, Rule: u.Rule, Budget: u.Budget, Key: u.Key,
		Calls: n, MaxCalls: u.MaxCalls, Amount: sum.String(), Unit: u.Unit, WindowEnd: u.WindowEnd, Unsettled: len(u.Ops),
	}
	if u.MaxCalls > 0 {
		out.RemainingCalls = max(u.MaxCalls-n, 0)
	}
	if u.MaxSum != nil {
		out.MaxSum = u.MaxSum.String()
		out.RemainingAmount = u.MaxSum.Sub(sum).String()
	}
	return out
}

// budgetsAPI serves GET /v1/budgets.
type budgetsAPI struct {
	moments *momentsAPI // authenticates the caller
	list    func(context.Context) ([]budget.Usage, error)
	now     func() time.Time
}

func (a *budgetsAPI) register(mux *http.ServeMux) {
	mux.HandleFunc("GET "+APIBudgets, a.get)
}

func (a *budgetsAPI) get(w http.ResponseWriter, r *http.Request) {
	if _, ok := a.moments.principal(w, r); !ok {
		return
	}
	us, err := a.list(r.Context())
	if err != nil {
		a.moments.log.Error(err, "Listing budgets failed")
		writeAPIError(w, http.StatusServiceUnavailable, CodeUnavailable, "budgets could not be listed")
		return
	}
	now := a.now()
	out := struct {
		Budgets []BudgetJSON `json:"budgets"`
	}{Budgets: make([]BudgetJSON, 0, len(us))}
	for _, u := range us {
		out.Budgets = append(out.Budgets, BudgetJSONOf(u, now))
	}
	slices.SortFunc(out.Budgets, func(x, y BudgetJSON) int {
		return strings.Compare(x.Namespace+"/"+x.Policy+"/"+x.Rule+"/"+x.Budget+"/"+x.Key, y.Namespace+"/"+y.Policy+"/"+y.Rule+"/"+y.Budget+"/"+y.Key)
	})
	writeJSON(w, http.StatusOK, out)
}
